// Recomputation (--recompute; Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost"):
// a transformation of the step's schedule. The forward passes are cut into segments; the last
// output of each segment is a checkpoint, kept until backward. Every other output of a segment,
// and what its passes save for backward, is dropped after its forward use and computed again
// (Pass::kRecompute, in forward order) just before the first pass of backward that reads any of
// it. Dropped means only that its lifetime ends: a memory plan that shares bytes between
// tensors whose lifetimes do not meet (reuse_plan) turns that into bytes saved.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/nn/schedule.h"

namespace dlb {

struct RecomputePolicy {
  enum class Kind { kNone, kSqrt, kEvery };
  Kind kind = Kind::kNone;
  int64_t every = 0;  // kEvery: forward passes per segment
  bool operator==(const RecomputePolicy& o) const {
    return kind == o.kind && (kind != Kind::kEvery || every == o.every);
  }
};

// "none", "sqrt", "every:K" (K >= 1); nullopt for anything else.
std::optional<RecomputePolicy> parse_recompute(std::string_view text);
std::string recompute_name(const RecomputePolicy& policy);  // the text parse_recompute reads

// The segment of each of `passes` forward passes, in order: every:K, K passes each; sqrt,
// ceil(sqrt(n)) passes each; none, one segment. (Segments of about equal bytes instead, Chen et
// al.'s other split, left resnet50's and vgg16's planned activation peaks higher at 64x64: the
// large early layers then became many checkpoints.)
std::vector<int64_t> forward_segments(const RecomputePolicy& policy, size_t passes);

// `schedule` with the recomputations the policy asks for inserted (and its dependencies linked
// again). Segments are forward_segments'; the last segment is not recomputed (backward reads it
// first). A forward pass is recomputed unless its output is its
// segment's checkpoint, or one of its outputs is read by a forward pass of another segment (a
// residual connection across a boundary), or is `kept` (read after the step, as the logits):
// those stay until backward. The recomputations change no state and write the same bits.
Schedule recompute_schedule(const Schedule& schedule, const std::vector<TensorInfo>& tensors,
                            const RecomputePolicy& policy, const std::vector<int>& kept = {});

}  // namespace dlb
