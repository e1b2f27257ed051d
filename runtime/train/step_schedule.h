// The training step's schedule, built from a declared graph with no backend: what the Trainer
// runs, and what the what-if simulator (runtime/sim/) replays. Forward, softmax cross-entropy and
// backward; then the memory plan's reordering and recomputation; then swapping; then the sync
// policy's passes (runtime/overlap/sync_schedule.h), which the caller inserts last.
#pragma once
#include <vector>

#include "runtime/nn/graph.h"
#include "runtime/nn/memory_plan.h"
#include "runtime/nn/recompute.h"
#include "runtime/nn/schedule.h"
#include "runtime/overlap/bucket_plan.h"

namespace dlb {

// The loss pass's tensors, declared in the graph's table.
struct LossTensors {
  int labels = -1, probs = -1, loss = -1;
};
LossTensors declare_loss_tensors(Graph& graph, int64_t batch);

// What no plan may free: the logits, which a caller may read after the step (a step dump).
std::vector<int> kept_after_step(const Graph& graph);

// Forward, the loss, backward; reordered (MemoryPlanKind::kReorder) and with `recompute`'s
// activations computed again: the step before swapping and synchronisation.
Schedule compute_schedule(const Graph& graph, const LossTensors& loss, MemoryPlanKind plan,
                          const RecomputePolicy& recompute);

// `schedule` with the activations `swapped` (tensor ids, from runtime/nn/swap.h's choices)
// waiting in host memory, their host copies declared in the graph's table.
Schedule swap_activations(const Schedule& schedule, Graph& graph, const std::vector<int>& swapped);

// The gradient buckets of `graph`'s flat gradient buffer, the later ones about `bucket_mb`.
BucketPlan step_buckets(const Graph& graph, double bucket_mb);

// Whether the step has a loss scaler (fp16 activations): its optimizer's first update reads every
// gradient (the inf check), so every wait comes before it (runtime/overlap/sync_schedule.h).
bool loss_scaled(const PrecisionPolicy& policy);

}  // namespace dlb
