#include "suites/harness/record.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>

#include "runtime/core/error.h"

namespace dlb {

nlohmann::json memory_json(const MemoryStats& stats) {
  nlohmann::json peak = nlohmann::json::object();
  for (size_t c = 0; c < kNumMemCategories; ++c) {
    peak[std::string(mem_category_name(static_cast<MemCategory>(c)))] = stats.peak[c];
  }
  return {{"peak_bytes_by_category", peak}, {"peak_bytes_total", stats.total_peak}};
}

void write_json_atomically(const std::string& path, const nlohmann::json& j) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw IoError(fmt::format("cannot write '{}'", tmp));
    out << j.dump(2) << "\n";
    if (!out.flush()) throw IoError(fmt::format("writing '{}' failed", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw IoError(fmt::format("cannot rename '{}' to '{}'", tmp, path));
  }
}

}  // namespace dlb
