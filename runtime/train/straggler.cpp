#include "runtime/train/straggler.h"

#include <fmt/format.h>

#include <chrono>

#include "runtime/core/error.h"
#include "runtime/core/parse_number.h"

namespace dlb {

std::optional<StragglerSpec> parse_straggler(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const std::optional<int64_t> rank = parse_whole(text.substr(0, colon), 0, 99999999);
  const std::optional<double> factor = parse_finite(text.substr(colon + 1));
  if (!rank || !factor) return std::nullopt;
  return StragglerSpec{*rank, *factor};
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
