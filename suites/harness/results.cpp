#include "suites/harness/results.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <fstream>

#include "runtime/core/error.h"

namespace dlb {

void append_jsonl(const std::string& path, const nlohmann::json& record) {
  const std::string line = record.dump() + "\n";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(fmt::format("cannot open '{}' for appending", path));
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = write(fd, line.data() + done, line.size() - done);
    if (n < 0) {
      close(fd);
      throw IoError(fmt::format("writing '{}' failed", path));
    }
    done += static_cast<size_t>(n);
  }
  const bool synced = fsync(fd) == 0;
  close(fd);
  if (!synced) throw IoError(fmt::format("fsync of '{}' failed", path));
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    try {
      out.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::parse_error&) {
      fmt::print(stderr, "dlbench: {}:{}: skipping a line that is not JSON (torn write?)\n", path,
                 n);
    }
  }
  return out;
}

std::set<std::string> ok_point_ids(const std::string& path) {
  std::set<std::string> ids;
  for (const auto& r : read_jsonl(path)) {
    if (r.value("status", "") == "ok" && r.contains("point"))
      ids.insert(r["point"].value("id", ""));
  }
  return ids;
}

}  // namespace dlb
