// Gradient synchronisation strategies (docs/architecture.md, overlap/). The strategies themselves
// come with the communicator; with one rank there is nothing to synchronise and all three coincide.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dlb {

enum class OverlapStrategy { kNone, kBackward, kForward };
inline constexpr OverlapStrategy kOverlapStrategies[] = {
    OverlapStrategy::kNone, OverlapStrategy::kBackward, OverlapStrategy::kForward};
std::string_view overlap_name(OverlapStrategy s);
std::optional<OverlapStrategy> parse_overlap(std::string_view s);

// How a step's gradients reach the weights (--sync): sync, the step's own averaged gradients
// (the overlap strategy says when); stale:K, the averaged gradients of K steps before, so a
// step's all-reduce runs behind the next K steps' compute (sync_schedule.h; stale:0 is sync);
// async, each rank's gradients applied alone by a parameter server on rank 0 as they arrive
// (param_server.h); independent, each rank's own gradients, unaveraged, with the ranks meeting
// after backward as sync's do but exchanging nothing (sync_schedule.h): what the ranks' compute
// costs beside each other, in step, without the gradients' traffic.
struct SyncMode {
  enum class Kind { kSync, kStale, kAsync, kIndependent };
  Kind kind = Kind::kSync;
  int64_t staleness = 0;  // kStale: K >= 1
  bool operator==(const SyncMode& o) const { return kind == o.kind && staleness == o.staleness; }
};
// "sync", "stale:K" (a whole K >= 0, at most 1000; stale:0 is sync), "async", "independent";
// nullopt for anything else.
std::optional<SyncMode> parse_sync_mode(std::string_view s);
std::string sync_mode_name(const SyncMode& m);  // the text parse_sync_mode reads

}  // namespace dlb
