// A validator for the subset of JSON Schema (2020-12) that dlbench's schemas use: type (a name
// or a list), properties, required, additionalProperties (false or a schema), propertyNames,
// enum, const, minimum, exclusiveMinimum, maximum, exclusiveMaximum, minItems, items,
// minProperties, and local "$ref": "#/$defs/...". A schema with any other keyword is refused
// (InvalidArgument), never checked in part. Errors name the JSON pointer of the offending value
// and what was expected.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dlb {

// Returns every violation, e.g. "/defaults/batch: expected an integer >= 1, got 0".
std::vector<std::string> validate_json(const nlohmann::json& instance,
                                       const nlohmann::json& schema);

}  // namespace dlb
