#include "runtime/train/straggler.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <stdexcept>

#include "runtime/core/error.h"

namespace dlb {

std::optional<StragglerSpec> parse_straggler(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon > 9) return std::nullopt;
  StragglerSpec s;
  s.rank = 0;
  for (char c : text.substr(0, colon)) {
    if (c < '0' || c > '9') return std::nullopt;
    s.rank = s.rank * 10 + (c - '0');
  }
  const std::string factor(text.substr(colon + 1));
  if (factor.empty() || factor.size() > 24 ||
      factor.find_first_not_of("0123456789.eE+-") != std::string::npos) {
    return std::nullopt;
  }
  size_t used = 0;
  try {
    s.factor = std::stod(factor, &used);
  } catch (const std::logic_error&) {
    return std::nullopt;
  }
  if (used != factor.size() || !std::isfinite(s.factor)) return std::nullopt;
  return s;
}

std::string straggler_name(const StragglerSpec& s) {
  return fmt::format("{}:{}", s.rank, s.factor);
}

SlowedPasses::SlowedPasses(PassRunner& inner, double factor) : inner_(inner), factor_(factor) {
  if (!(factor >= 1)) {
    throw InvalidArgument(fmt::format("a straggler's factor must be at least 1, not {}", factor));
  }
}

void SlowedPasses::run_pass(const Step& step, const LayerContext* ctx) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  inner_.run_pass(step, ctx);
  const auto ran = Clock::now() - start;
  const Clock::time_point until =
      start + std::chrono::duration_cast<Clock::duration>(ran * factor_);
  while (Clock::now() < until) {
    // Spin: the rank keeps its core, as a slower one would.
  }
}

}  // namespace dlb
