#include "suites/harness/core/json_schema.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <iterator>

#include "runtime/core/error.h"

namespace dlb {
namespace {

using json = nlohmann::json;

class Validator {
 public:
  explicit Validator(const json& root) : root_(root) {}
  std::vector<std::string> errors;

  void check(const json& v, const json& s, const std::string& path) {
    const json& schema = resolve(s);
    check_keywords(schema);
    const std::string where = path.empty() ? "/" : path;
    if (schema.contains("type") && !has_any_type(v, schema["type"])) {
      errors.push_back(
          fmt::format("{}: expected {}, got {}", where, describe_types(schema["type"]), brief(v)));
      return;
    }
    if (schema.contains("const") && v != schema["const"]) {
      errors.push_back(
          fmt::format("{}: expected {}, got {}", where, schema["const"].dump(), brief(v)));
    }
    if (schema.contains("enum")) {
      bool found = false;
      for (const json& e : schema["enum"]) found = found || e == v;
      if (!found) {
        std::vector<std::string> names;
        for (const json& e : schema["enum"]) names.push_back(e.dump());
        errors.push_back(fmt::format("{}: expected one of {}, got {}", where,
                                     fmt::format("{}", fmt::join(names, ", ")), brief(v)));
      }
    }
    if (v.is_number()) check_number(v, schema, where);
    if (v.is_object()) check_object(v, schema, path);
    if (v.is_array()) check_array(v, schema, path);
  }

 private:
  const json& resolve(const json& s) {
    if (!s.contains("$ref")) return s;
    const std::string ref = s["$ref"].get<std::string>();
    if (ref.rfind("#/", 0) != 0)
      throw InvalidArgument("schema: only local $ref is supported: " + ref);
    return resolve(root_.at(json::json_pointer(ref.substr(1))));
  }

  // A keyword this validator does not check would pass every value silently: refused instead.
  // Annotations (title, description, default) assert nothing, so there is nothing to check.
  static void check_keywords(const json& schema) {
    static const char* const kKnown[] = {"type",          "properties",
                                         "required",      "additionalProperties",
                                         "enum",          "const",
                                         "minimum",       "exclusiveMinimum",
                                         "maximum",       "exclusiveMaximum",
                                         "minItems",      "items",
                                         "minProperties", "propertyNames",
                                         "$ref",          "$defs",
                                         "$schema",       "$id",
                                         "title",         "description",
                                         "default"};
    for (const auto& [key, _] : schema.items()) {
      if (std::find(std::begin(kKnown), std::end(kKnown), key) == std::end(kKnown)) {
        throw InvalidArgument(fmt::format("schema: keyword '{}' is not supported", key));
      }
    }
  }

  // "type": "integer", or a list of types: ["integer", "null"].
  static bool has_any_type(const json& v, const json& types) {
    if (types.is_string()) return has_type(v, types.get<std::string>());
    for (const json& t : types) {
      if (has_type(v, t.get<std::string>())) return true;
    }
    return false;
  }

  static std::string describe_types(const json& types) {
    if (types.is_string()) return describe_type(types.get<std::string>());
    std::vector<std::string> names;
    for (const json& t : types) names.push_back(describe_type(t.get<std::string>()));
    return fmt::format("{}", fmt::join(names, " or "));
  }

  static bool has_type(const json& v, const std::string& t) {
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    if (t == "string") return v.is_string();
    // JSON has no integer width; dlbench's integers are 64-bit signed.
    if (t == "integer")
      return v.is_number_integer() &&
             !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX});
    if (t == "number") return v.is_number();
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    return false;
  }

  static std::string describe_type(const std::string& t) {
    if (t == "integer" || t == "array" || t == "object") return "an " + t;
    return "a " + t;
  }

  static std::string brief(const json& v) {
    std::string s = v.dump();
    return s.size() > 60 ? s.substr(0, 57) + "..." : s;
  }

  void check_number(const json& v, const json& s, const std::string& where) {
    const double x = v.get<double>();
    if (s.contains("minimum") && x < s["minimum"].get<double>()) {
      errors.push_back(
          fmt::format("{}: expected a value >= {}, got {}", where, s["minimum"].dump(), v.dump()));
    }
    if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>()) {
      errors.push_back(fmt::format("{}: expected a value > {}, got {}", where,
                                   s["exclusiveMinimum"].dump(), v.dump()));
    }
    if (s.contains("maximum") && x > s["maximum"].get<double>()) {
      errors.push_back(
          fmt::format("{}: expected a value <= {}, got {}", where, s["maximum"].dump(), v.dump()));
    }
    if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>()) {
      errors.push_back(fmt::format("{}: expected a value < {}, got {}", where,
                                   s["exclusiveMaximum"].dump(), v.dump()));
    }
  }

  void check_object(const json& v, const json& s, const std::string& path) {
    if (s.contains("required")) {
      for (const json& k : s["required"]) {
        if (!v.contains(k.get<std::string>())) {
          errors.push_back(fmt::format("{}: missing required key '{}'", path.empty() ? "/" : path,
                                       k.get<std::string>()));
        }
      }
    }
    if (s.contains("minProperties") && v.size() < s["minProperties"].get<size_t>()) {
      errors.push_back(fmt::format("{}: expected at least {} keys", path.empty() ? "/" : path,
                                   s["minProperties"].get<size_t>()));
    }
    const json* props = s.contains("properties") ? &s["properties"] : nullptr;
    for (const auto& [key, value] : v.items()) {
      const std::string child = path + "/" + key;
      if (s.contains("propertyNames")) check(json(key), s["propertyNames"], child + " (its key)");
      if (props && props->contains(key)) {
        check(value, (*props)[key], child);
      } else if (s.contains("additionalProperties")) {
        const json& extra = s["additionalProperties"];
        if (extra.is_boolean() && !extra.get<bool>()) {
          std::vector<std::string> known;
          if (props)
            for (const auto& [k, _] : props->items()) known.push_back(k);
          errors.push_back(fmt::format("{}: unknown key (expected one of {})", child,
                                       fmt::format("{}", fmt::join(known, ", "))));
        } else if (extra.is_object()) {
          check(value, extra, child);
        }
      }
    }
  }

  void check_array(const json& v, const json& s, const std::string& path) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) {
      errors.push_back(fmt::format("{}: expected at least {} item(s), got {}",
                                   path.empty() ? "/" : path, s["minItems"].get<size_t>(),
                                   v.size()));
    }
    if (s.contains("items")) {
      for (size_t i = 0; i < v.size(); ++i) check(v[i], s["items"], fmt::format("{}/{}", path, i));
    }
  }

  const json& root_;
};

}  // namespace

std::vector<std::string> validate_json(const nlohmann::json& instance,
                                       const nlohmann::json& schema) {
  Validator v(schema);
  v.check(instance, schema, "");
  return v.errors;
}

}  // namespace dlb
