#include "suites/harness/core/results.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "runtime/core/error.h"
#include "runtime/io/json_fields.h"
#include "runtime/io/json_text.h"
#include "runtime/io/text_file.h"
#include "suites/harness/core/json_schema.h"
#include "suites/harness/core/record.h"
#include "suites/harness/core/suite.h"

namespace dlb {

std::string non_finite_at(const nlohmann::json& j) {
  if (j.is_number_float() && !std::isfinite(j.get<double>())) return "/";
  if (!j.is_structured()) return "";
  for (const auto& [key, value] : j.items()) {
    if (std::string at = non_finite_at(value); !at.empty()) {
      return "/" + key + (at == "/" ? "" : at);
    }
  }
  return "";
}

void append_jsonl(const std::string& path, const nlohmann::json& record) {
  if (const std::string at = non_finite_at(record); !at.empty()) {
    throw InvalidArgument(fmt::format(
        "a record for '{}' holds a number that is not finite at {}: not appended", path, at));
  }
  // A string that is not UTF-8 (a file's name, a log's tail) as U+FFFD: never a record lost.
  const std::string line =
      record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  // O_NONBLOCK: a FIFO put in the file's place refuses at once (no reader), never blocks.
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0) throw IoError(fmt::format("cannot open '{}' for appending", path));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    throw IoError(fmt::format("will not append to '{}': it is not a regular file", path));
  }
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

namespace {

const nlohmann::json& result_schema() {
  static const nlohmann::json schema = [] {
    const std::string path = suites_dir() + "/schema/result.schema.json";
    return parse_json(read_text_file(path, "schema"), path);
  }();
  return schema;
}

// What the harness reads back of a record, beyond the schema: the summary's columns.
void check_harness_keys(const nlohmann::json& record, const std::string& where) {
  const JsonFields r(record, where);
  const JsonFields point = r.object("point");
  point.integer("index", 1);
  point.string("id");
  // The suite's own spelling of the point; its system names the peer the summary compares.
  if (const JsonFields suite_config = r.object("suite_config");
      suite_config.json().contains("system")) {
    suite_config.string("system");  // null included: the summary reads it as a name
  }
  if (r.string("status") == "ok") {
    r.object("metrics").number("throughput_img_s", 0);
    if (r.has("memory")) r.object("memory").number("peak_bytes_total", 0);
  }
  if (r.has("message")) r.string("message");
}

}  // namespace

void check_record(const nlohmann::json& record, const std::string& where) {
  if (const std::string at = non_finite_at(record); !at.empty()) {
    throw InvalidArgument(fmt::format("{}: {} is not a finite number", where, at));
  }
  const std::vector<std::string> errors = validate_json(record, result_schema());
  if (!errors.empty()) {
    throw InvalidArgument(fmt::format("{}: not a dlbench result record: {}", where, errors[0]));
  }
  check_harness_keys(record, where);
}

void check_record_environment(const nlohmann::json& environment, const std::string& where) {
  const std::vector<std::string> errors =
      validate_json(environment, result_schema().at("properties").at("environment"));
  if (!errors.empty()) {
    throw InvalidArgument(fmt::format("{}: not a record's environment: {}", where, errors[0]));
  }
}

std::vector<nlohmann::json> parse_results(std::string_view text, const std::string& path) {
  std::vector<nlohmann::json> out;
  int64_t number = 0;
  size_t start = 0;
  while (start < text.size()) {
    ++number;
    const size_t end = text.find('\n', start);
    const std::string where = fmt::format("{}:{}", path, number);
    if (end == std::string_view::npos) {
      throw InvalidArgument(where + ": a record cut short (no newline ends it: a torn write)");
    }
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    nlohmann::json record = parse_json(line, where);
    check_record(record, where);
    out.push_back(std::move(record));
  }
  return out;
}

std::vector<nlohmann::json> read_results(const std::string& path) {
  if (!path_exists(path)) return {};
  return parse_results(read_text_file(path, "results file"), path);
}

std::string set_aside_torn_tail(const std::string& path, std::string_view text) {
  const size_t newline = text.rfind('\n');
  const size_t keep = newline == std::string_view::npos ? 0 : newline + 1;
  if (keep == text.size()) return "";
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || static_cast<size_t>(st.st_size) != text.size()) {
    throw IoError(
        fmt::format("'{}' changed while it was read (is another sweep writing it?)", path));
  }
  // The first free "<path>.torn-N", taken with O_EXCL: two resumes never share one.
  std::string torn;
  int fd = -1;
  for (int n = 1; fd < 0; ++n) {
    torn = fmt::format("{}.torn-{}", path, n);
    fd = open(torn.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) {
      throw IoError(fmt::format("cannot create '{}': {}", torn, std::strerror(errno)));
    }
  }
  const std::string_view tail = text.substr(keep);
  const bool written = write(fd, tail.data(), tail.size()) == static_cast<ssize_t>(tail.size());
  const bool synced = written && fsync(fd) == 0;
  close(fd);
  if (!synced) throw IoError(fmt::format("writing '{}' failed", torn));
  // Only now, with the torn bytes safe, is the file cut back to its last whole line.
  if (truncate(path.c_str(), static_cast<off_t>(keep)) != 0) {
    throw IoError(fmt::format("cannot cut '{}' back to its last whole line", path));
  }
  return torn;
}

std::set<std::string> ok_point_ids(const std::vector<nlohmann::json>& records) {
  std::set<std::string> ids;
  for (const auto& r : records) {
    if (r["status"] == "ok") ids.insert(r["point"]["id"].get<std::string>());
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
    if (r.value("mode", "measured") != record.value("mode", "measured")) continue;
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
