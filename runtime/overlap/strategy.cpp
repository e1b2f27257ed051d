#include "runtime/overlap/strategy.h"

#include "runtime/core/parse_number.h"

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

std::optional<SyncMode> parse_sync_mode(std::string_view s) {
  if (s == "sync") return SyncMode{};
  if (s == "async") return SyncMode{SyncMode::Kind::kAsync, 0};
  if (s == "independent") return SyncMode{SyncMode::Kind::kIndependent, 0};
  if (s.rfind("stale:", 0) != 0) return std::nullopt;
  const std::optional<int64_t> k = parse_whole(s.substr(6), 0, 1000);
  if (!k) return std::nullopt;
  if (*k == 0) return SyncMode{};
  return SyncMode{SyncMode::Kind::kStale, *k};
}

std::string sync_mode_name(const SyncMode& m) {
  switch (m.kind) {
    case SyncMode::Kind::kStale:
      return "stale:" + std::to_string(m.staleness);
    case SyncMode::Kind::kAsync:
      return "async";
    case SyncMode::Kind::kIndependent:
      return "independent";
    case SyncMode::Kind::kSync:
      break;
  }
  return "sync";
}

}  // namespace dlb
