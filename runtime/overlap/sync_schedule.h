// The sync policy as a transformation of the step's schedule (docs/architecture.md, "The step").
// It inserts all-reduce and update steps into forward + loss + backward:
//   none:     after backward, one all-reduce of the whole buffer, then every bucket's update.
//   backward: a bucket's all-reduce right after the pass that writes its last gradient, while
//             backward goes on; after backward, every bucket's update.
//   forward:  all-reduces as backward; each bucket's update moves to the next step, just before
//             the first forward pass that reads its parameters.
// With one rank there is nothing to reduce: every strategy gives the same step (updates after
// backward).
#pragma once
#include "runtime/nn/graph.h"
#include "runtime/nn/schedule.h"
#include "runtime/overlap/bucket_plan.h"
#include "runtime/overlap/strategy.h"

namespace dlb {

// `plan` is over graph.flat_params(). Relinks the dependencies.
void insert_sync(Schedule& schedule, const Graph& graph, const BucketPlan& plan,
                 OverlapStrategy strategy, bool distributed);

}  // namespace dlb
