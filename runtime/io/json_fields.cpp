#include "runtime/io/json_fields.h"

#include <fmt/format.h>

#include <cmath>

#include "runtime/core/error.h"

namespace dlb {
namespace {

// A value as a message shows it: short, whatever its size.
std::string shown(const nlohmann::json& v) {
  std::string text = v.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

}  // namespace

JsonFields::JsonFields(const nlohmann::json& object, std::string where)
    : object_(object), where_(std::move(where)) {
  if (!object_.is_object()) {
    throw InvalidArgument(
        fmt::format("{}: expected a JSON object, got {}", where_, shown(object_)));
  }
}

bool JsonFields::has(std::string_view key) const {
  const auto it = object_.find(key);
  return it != object_.end() && !it->is_null();
}

void JsonFields::fail(std::string_view key, std::string_view expected) const {
  const auto it = object_.find(key);
  throw InvalidArgument(fmt::format("{}: key '{}': expected {}, got {}", where_, key, expected,
                                    it == object_.end() ? "nothing" : shown(*it)));
}

const nlohmann::json& JsonFields::required(std::string_view key) const {
  const auto it = object_.find(key);
  if (it == object_.end()) fail(key, "a value");
  return *it;
}

std::string JsonFields::string(std::string_view key) const {
  const nlohmann::json& v = required(key);
  if (!v.is_string()) fail(key, "a string");
  return v.get<std::string>();
}

std::string JsonFields::string_or(std::string_view key, const std::string& fallback) const {
  return has(key) ? string(key) : fallback;
}

int64_t JsonFields::integer(std::string_view key, int64_t min, int64_t max) const {
  const nlohmann::json& v = required(key);
  const auto range = [&] { return fmt::format("an integer in [{}, {}]", min, max); };
  if (!v.is_number_integer()) fail(key, range());
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    fail(key, range());
  }
  const int64_t i = v.get<int64_t>();
  if (i < min || i > max) fail(key, range());
  return i;
}

int64_t JsonFields::integer_or(std::string_view key, int64_t fallback, int64_t min,
                               int64_t max) const {
  return has(key) ? integer(key, min, max) : fallback;
}

double JsonFields::number(std::string_view key, double min, double max) const {
  const nlohmann::json& v = required(key);
  const auto range = [&] { return fmt::format("a finite number in [{}, {}]", min, max); };
  if (!v.is_number()) fail(key, range());
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < min || d > max) fail(key, range());
  return d;
}

bool JsonFields::boolean(std::string_view key) const {
  const nlohmann::json& v = required(key);
  if (!v.is_boolean()) fail(key, "true or false");
  return v.get<bool>();
}

JsonFields JsonFields::object(std::string_view key) const {
  const nlohmann::json& v = required(key);
  if (!v.is_object()) fail(key, "an object");
  return JsonFields(v, fmt::format("{}: {}", where_, key));
}

const nlohmann::json& JsonFields::array(std::string_view key) const {
  const nlohmann::json& v = required(key);
  if (!v.is_array()) fail(key, "an array");
  return v;
}

std::string JsonFields::element(std::string_view key, size_t i) const {
  return fmt::format("{}: {}[{}]", where_, key, i);
}

}  // namespace dlb
