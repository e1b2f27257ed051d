#include "runtime/memory/host_memory.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

#include "runtime/core/error.h"
#include "runtime/memory/allocator.h"

namespace dlb {
namespace {

// A control group's limit in bytes, or 0 where the file is absent or says "max". A v1 group
// without a limit reads a number near 2^63, which the physical memory then bounds.
size_t cgroup_limit(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return 0;
  try {
    return parse_bytes(text);
  } catch (const InvalidArgument&) {
    return 0;
  }
}

}  // namespace

size_t host_memory_bytes() {
  if (const char* given = std::getenv("DLBENCH_HOST_MEMORY"); given && *given) {
    try {
      return parse_bytes(given);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(fmt::format("DLBENCH_HOST_MEMORY={}: {}", given, e.what()));
    }
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  size_t bytes = pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const size_t limit = cgroup_limit(path);
    if (limit > 0) bytes = bytes == 0 ? limit : std::min(bytes, limit);
  }
  return bytes;
}

void require_memory(double estimate_bytes, size_t limit, std::string_view what,
                    std::string_view where) {
  if (limit == 0 || !(estimate_bytes > static_cast<double>(limit))) return;
  // format_bytes takes whole bytes: an estimate beyond them is said in GiB.
  const std::string estimate = estimate_bytes < 1.8e19
                                   ? format_bytes(static_cast<size_t>(estimate_bytes))
                                   : fmt::format("{:.3g} GiB", estimate_bytes / (1u << 30));
  throw OutOfMemory(fmt::format("{} would take about {}, more than {} ({})", what, estimate, where,
                                format_bytes(limit)));
}

}  // namespace dlb
