// Numbers inside option texts ("stale:4", "step:30,60", "3:2.5", "cv:0.05"): the whole text must
// be the number (no sign where a whole number is asked for beyond what the range allows, no
// spaces, no trailing characters), and nullopt stands for anything else, so that the caller
// says what it expected.
#pragma once
#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dlb {

// A whole number in [min, max].
inline std::optional<int64_t> parse_whole(std::string_view text, int64_t min, int64_t max) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, v);
  if (text.empty() || error != std::errc() || stop != end || v < min || v > max) {
    return std::nullopt;
  }
  return v;
}

// A finite number (decimal or with an exponent; no inf, no nan, nothing out of a double's range).
inline std::optional<double> parse_finite(std::string_view text) {
  double v = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, v);
  if (text.empty() || error != std::errc() || stop != end || !std::isfinite(v)) {
    return std::nullopt;
  }
  return v;
}

}  // namespace dlb
