// The one grammar of numbers dlbench reads from people: options, option texts ("stale:4",
// "step:30,60", "cv:0.05"), check-ops instances and sizes ("1.5GiB"). Decimal, with an optional
// fraction and exponent (std::from_chars' general format): no hex ("0x10", "0x1p30"), no leading
// space or '+', no inf or nan, nothing past the number, and no value that overflows or underflows
// a double (1e-400 is refused, not read as 0). A whole number has no fraction or exponent, and an
// unsigned one no sign. nullopt stands for anything else, so that the caller says what it
// expected.
#pragma once
#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

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

// A whole number of 0 to 2^64 - 1: "-1" is refused, never wrapped.
inline std::optional<uint64_t> parse_unsigned(std::string_view text) {
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, v);
  if (text.empty() || error != std::errc() || stop != end) return std::nullopt;
  return v;
}

// The finite number at the start of `text`, and how many characters it took (a size's "1.5" of
// "1.5GiB"); nullopt when `text` does not start with one.
inline std::optional<std::pair<double, size_t>> parse_finite_prefix(std::string_view text) {
  double v = 0;
  const auto [stop, error] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || error != std::errc() || !std::isfinite(v)) return std::nullopt;
  return std::pair{v, static_cast<size_t>(stop - text.data())};
}

}  // namespace dlb
