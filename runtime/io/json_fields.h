// The fields of a JSON object read from a file dlbench did not write itself (a point file, a
// peak file, a record read back), read strictly: each getter checks the key's presence, type and
// range, and a failure is one InvalidArgument naming where the object came from (file, line,
// path inside it), the key, what was expected and what was there. No nlohmann exception, whose
// text names neither the file nor the key, escapes a reader built on it.
#pragma once
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace dlb {

class JsonFields {
 public:
  // `where` names the object in messages: "point.json", "results.jsonl:3", "peaks.json: peaks[2]".
  // InvalidArgument unless `object` is a JSON object.
  JsonFields(const nlohmann::json& object, std::string where);

  const std::string& where() const { return where_; }
  const nlohmann::json& json() const { return object_; }
  // Present, and not null.
  bool has(std::string_view key) const;

  const nlohmann::json& required(std::string_view key) const;
  std::string string(std::string_view key) const;
  // The fallback when the key is absent or null.
  std::string string_or(std::string_view key, const std::string& fallback) const;
  // An integer in [min, max] (a number with a fraction, or written as 1e3, is not one).
  int64_t integer(std::string_view key, int64_t min = std::numeric_limits<int64_t>::min(),
                  int64_t max = std::numeric_limits<int64_t>::max()) const;
  int64_t integer_or(std::string_view key, int64_t fallback,
                     int64_t min = std::numeric_limits<int64_t>::min(),
                     int64_t max = std::numeric_limits<int64_t>::max()) const;
  // A finite number in [min, max].
  double number(std::string_view key, double min = -std::numeric_limits<double>::max(),
                double max = std::numeric_limits<double>::max()) const;
  bool boolean(std::string_view key) const;
  JsonFields object(std::string_view key) const;
  // An array; `what` of its elements is the caller's to check (element(i) names them).
  const nlohmann::json& array(std::string_view key) const;
  // "<where>: <key>[i]", for an element of array `key`.
  std::string element(std::string_view key, size_t i) const;

  [[noreturn]] void fail(std::string_view key, std::string_view expected) const;

 private:
  const nlohmann::json& object_;
  std::string where_;
};

}  // namespace dlb
