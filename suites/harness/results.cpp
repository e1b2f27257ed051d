#include "suites/harness/results.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <fstream>

#include "runtime/core/error.h"
#include "runtime/io/json_text.h"

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
    nlohmann::json r;
    try {
      r = parse_json(line, fmt::format("{}:{}", path, n));
    } catch (const InvalidArgument&) {
      fmt::print(stderr, "dlbench: {}:{}: skipping a line that is not JSON (torn write?)\n", path,
                 n);
      continue;
    }
    // What the harness reads back of a record: its status and its point's id.
    if (!r.is_object() || !r.contains("status") || !r["status"].is_string() ||
        !r.contains("point") || !r["point"].is_object() || !r["point"].contains("id") ||
        !r["point"]["id"].is_string() || !r.contains("config") || !r["config"].is_object()) {
      fmt::print(stderr, "dlbench: {}:{}: skipping a line that is not a dlbench record\n", path, n);
      continue;
    }
    out.push_back(std::move(r));
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

namespace {
nlohmann::json config_but_ranks(nlohmann::json config) {
  config.erase("ranks");
  return config;
}
}  // namespace

void add_scaling_efficiency(nlohmann::json& record, const std::vector<nlohmann::json>& recorded) {
  if (record.value("status", "") != "ok") return;
  const auto& metrics = record["metrics"];
  if (!metrics.contains("throughput_img_s")) return;
  const nlohmann::json key = config_but_ranks(record["config"]);
  for (const auto& r : recorded) {
    if (r.value("status", "") != "ok" || r["config"].value("ranks", 0) != 1) continue;
    if (config_but_ranks(r["config"]) != key || !r["metrics"].contains("throughput_img_s")) {
      continue;
    }
    const double ranks = record["config"]["ranks"].get<double>();
    const double base = r["metrics"]["throughput_img_s"].get<double>();
    if (!(base > 0)) return;
    record["metrics"]["scaling_efficiency"] =
        metrics["throughput_img_s"].get<double>() / (ranks * base);
    record["metrics"]["scaling_baseline"] = r.contains("point") ? r["point"]["id"] : nullptr;
    return;
  }
}

}  // namespace dlb
