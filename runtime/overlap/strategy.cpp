#include "runtime/overlap/strategy.h"

namespace dlb {

std::string_view overlap_name(OverlapStrategy s) {
  switch (s) {
    case OverlapStrategy::kNone:
      return "none";
    case OverlapStrategy::kBackward:
      return "backward";
    case OverlapStrategy::kForward:
      return "forward";
  }
  return "?";
}

std::optional<OverlapStrategy> parse_overlap(std::string_view s) {
  for (auto k : kOverlapStrategies)
    if (overlap_name(k) == s) return k;
  return std::nullopt;
}

}  // namespace dlb
