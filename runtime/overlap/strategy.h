// Gradient synchronisation strategies (docs/architecture.md, overlap/). The strategies themselves
// come with the communicator; with one rank there is nothing to synchronise and all three coincide.
#pragma once
#include <optional>
#include <string_view>

namespace dlb {

enum class OverlapStrategy { kNone, kBackward, kForward };
inline constexpr OverlapStrategy kOverlapStrategies[] = {
    OverlapStrategy::kNone, OverlapStrategy::kBackward, OverlapStrategy::kForward};
std::string_view overlap_name(OverlapStrategy s);
std::optional<OverlapStrategy> parse_overlap(std::string_view s);

}  // namespace dlb
