#include "suites/harness/run/mllog.h"

#include <fmt/format.h>

#include <chrono>

#include "runtime/core/error.h"

namespace dlb {

MlLog::MlLog(const std::string& path) : path_(path), out_(path, std::ios::trunc) {
  if (!out_) throw IoError(fmt::format("cannot write the MLPerf log {}", path));
}

void MlLog::event(std::string_view key, const nlohmann::json& value,
                  const nlohmann::json& metadata) {
  write("POINT_IN_TIME", key, value, metadata);
}
void MlLog::start(std::string_view key, const nlohmann::json& value,
                  const nlohmann::json& metadata) {
  write("INTERVAL_START", key, value, metadata);
}
void MlLog::end(std::string_view key, const nlohmann::json& value, const nlohmann::json& metadata) {
  write("INTERVAL_END", key, value, metadata);
}

void MlLog::write(const char* event_type, std::string_view key, const nlohmann::json& value,
                  const nlohmann::json& metadata) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  // ordered_json keeps the reference logger's field order, which people grep for.
  const nlohmann::ordered_json line = {
      {"namespace", ""},
      {"time_ms", std::chrono::duration_cast<std::chrono::milliseconds>(now).count()},
      {"event_type", event_type},
      {"key", key},
      {"value", value},
      {"metadata", metadata}};
  out_ << ":::MLLOG " << line.dump() << '\n' << std::flush;
  if (!out_) throw IoError(fmt::format("writing the MLPerf log {} failed", path_));
}

}  // namespace dlb
