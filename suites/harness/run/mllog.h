// MLPerf-style logging: one ":::MLLOG {json}" line per event, in the format of MLCommons'
// mlperf-logging package (namespace, time_ms, event_type, key, value, metadata), so its
// compliance checker can read the log. Every line is flushed as it is written.
#pragma once
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace dlb {

class MlLog {
 public:
  // Opens (truncates) `path`; throws IoError naming it when it cannot.
  explicit MlLog(const std::string& path);

  void event(std::string_view key, const nlohmann::json& value = nullptr,
             const nlohmann::json& metadata = nlohmann::json::object());
  void start(std::string_view key, const nlohmann::json& value = nullptr,
             const nlohmann::json& metadata = nlohmann::json::object());
  void end(std::string_view key, const nlohmann::json& value = nullptr,
           const nlohmann::json& metadata = nlohmann::json::object());

 private:
  void write(const char* event_type, std::string_view key, const nlohmann::json& value,
             const nlohmann::json& metadata);
  std::string path_;
  std::ofstream out_;
};

}  // namespace dlb
