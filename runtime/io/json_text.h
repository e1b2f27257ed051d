// Parsing JSON that dlbench did not write itself (suite files, safetensors headers, records read
// back, point files): a nesting limit checked before the parse, and one message form for every
// failure. Deep nesting is refused without recursion, so no input can exhaust the stack, in the
// parse or in anything that walks the result afterwards (copies, dumps, schema checks).
#pragma once
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "runtime/core/error.h"

namespace dlb {

// No file dlbench reads legitimately nests more than a few levels (suites: 5, headers: 3).
constexpr int kMaxJsonDepth = 64;

// InvalidArgument("<where>: ...") for a NUL byte (which nlohmann's parser takes for the end of the
// text, ignoring what follows; JSON allows none) and for any array or object nested more than
// `max_depth` levels (brackets inside strings do not count).
void check_json_text(std::string_view text, std::string_view where, int max_depth = kMaxJsonDepth);

// The parse of `text`, or InvalidArgument("<where>: not valid JSON: ..."). Json is nlohmann::json
// or nlohmann::ordered_json (which keeps the file's key order).
template <typename Json = nlohmann::json>
Json parse_json(std::string_view text, std::string_view where) {
  check_json_text(text, where);
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(fmt::format("{}: not valid JSON: {}", where, e.what()));
  }
}

// `text` with every byte that is not part of valid UTF-8 written as \xNN (its hex): what a
// name from the disk (a file name is bytes) becomes before it goes into a record, whose JSON text
// must be UTF-8. Valid UTF-8 comes through unchanged.
std::string escape_non_utf8(std::string_view text);

}  // namespace dlb
