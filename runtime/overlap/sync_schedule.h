// The sync policy as a transformation of the step's schedule (docs/architecture.md, "The step").
// It inserts its own passes (Pass::kSync, with a SyncPass as Step::op and the bucket as Step::arg)
// into forward + loss + backward, and nothing re-orders them when they run (GradSync runs each
// as it comes):
//   all-reduce (comm lane): launches a bucket's reduction, after the work queued so far;
//   wait (compute lane):    what is queued after it runs after that reduction;
//   update (compute lane):  the optimizer over the bucket's parameters;
//   progress (host lane):   progresses the reductions in flight (MPI's only progress in poll
//                           mode) and records the spans of those that finished.
// The strategies:
//   none:     after backward, one all-reduce of the whole buffer and its wait, then every
//             bucket's update.
//   backward: a bucket's all-reduce right after the pass that writes its last gradient, while
//             backward goes on, with a progress pass after each later backward pass; after
//             backward, each bucket's wait and update.
//   forward:  all-reduces as backward; the waits and updates move to the next step, before the
//             first forward pass that reads any bucket's parameters (the front layers', whose
//             bucket is reduced last), in reduction order: the updates of buckets already
//             reduced run while the last reductions are still in flight. They read the buckets'
//             gradients as carried tensors (TensorKind::kCarried), and do nothing where no
//             reduction has happened since the last update (the first step, after a flush).
// With loss scaling the first update reads every gradient (the inf check): every wait comes
// before it. With one rank there is nothing to reduce: updates follow backward.
//
// Bounded staleness (SyncOptions::staleness K >= 1; --sync=stale:K): K gradient slots, tensors
// of the table kept across steps, of which step t uses slot t mod K. After backward, step t waits
// for its slot's reduction (launched K steps before), updates every parameter from it (the
// averaged gradients of step t - K; nothing in the first K steps), copies its own gradients into
// the slot (stash) and launches the slot's reduction, which runs behind the next K steps'
// compute, with a progress pass after each forward and backward pass. With one rank the slots
// delay the gradients the same way, and the step has no wait or reduction. The overlap strategy is
// none, and no loss scaling (its check reads this step's gradients, not the ones applied).
//
// Asynchronous SGD (SyncOptions::async; --sync=async; runtime/overlap/param_server.h): a pull
// before the first forward pass, a push after backward, and a progress pass after each forward
// and backward pass, in which rank 0 serves the other ranks' pushes. No update: the parameter
// server applies the gradients. The overlap strategy is none, and no loss scaling.
#pragma once
#include "runtime/nn/graph.h"
#include "runtime/nn/schedule.h"
#include "runtime/overlap/bucket_plan.h"
#include "runtime/overlap/strategy.h"

namespace dlb {

enum class SyncPass {
  kAllReduce,
  kWait,
  kUpdate,
  kUpdateCarried,
  kProgress,
  kStash,        // stale: this step's gradients into its slot
  kUpdateStale,  // stale: every parameter from the slot's reduced gradients
  kPull,         // async: the weights from the parameter server
  kPush,         // async: the gradients to the parameter server
};
inline constexpr SyncPass kSyncPasses[] = {
    SyncPass::kAllReduce,     SyncPass::kWait,     SyncPass::kUpdate,
    SyncPass::kUpdateCarried, SyncPass::kProgress, SyncPass::kStash,
    SyncPass::kUpdateStale,   SyncPass::kPull,     SyncPass::kPush};
// A kAllReduce's or kWait's bucket (Step::arg) that is the stale slot of the step, not a bucket.
inline constexpr int kStaleSlot = -2;
// Bounded staleness: the slot that step `step` (counted from 0 over every step run, as
// PassRunner::begin_step counts) waits for, updates from, stashes into and reduces, of the
// `staleness` slots its stale passes name. The program's rule; GradSync and the replay follow it.
inline int64_t stale_slot(int64_t step, int64_t staleness) { return step % staleness; }
struct Schedule;
// The slots a schedule's stale passes name (their count is K); 0 without staleness.
int64_t staleness_of(const Schedule& schedule);
// Whether a schedule's ranks pull and push through a parameter server (asynchronous SGD): it has
// both passes.
bool is_async(const Schedule& schedule);
// The pass's category in traces and listings: "allreduce", "wait", "optimizer" (every
// update), "progress", "stash", "pull", "push".
const char* sync_pass_name(SyncPass p);
// The sync pass a kSync step is (InvalidArgument for any other step).
SyncPass sync_pass_of(const Step& step);

struct SyncOptions {
  OverlapStrategy strategy = OverlapStrategy::kNone;
  bool distributed = false;
  // The optimizer's first update of a step reads every gradient (Optimizer::
  // reads_all_gradients_first): every wait goes before it.
  bool updates_read_all_gradients = false;
  // Bounded staleness: K >= 1 slots (above); 0: none.
  int64_t staleness = 0;
  // Asynchronous SGD through a parameter server (above).
  bool async = false;
};

// The buckets a schedule's sync passes name, from their tensors alone: each bucket's all-reduce
// writes its gradients, its update its parameters' values, and those are the flat parameters
// [first_param, first_param + num_params) (graph.flat_params()), whose slice of the flat buffer
// runs from the first's gradient to the end of the last's (the gaps between them included), as
// make_bucket_plan lays it out. What GradSync reduces and updates: the program's ids, not a plan it
// is handed. InvalidArgument where a pass names a tensor that is no parameter's, parameters that
// are not contiguous, a bucket whose passes name different parameters, or buckets that do not tile
// every parameter in order. Empty where no pass names a bucket (staleness, async).
BucketPlan buckets_of(const Schedule& schedule, const Graph& graph);

// `plan` is over graph.flat_params(). Declares the carried tensors the forward strategy reads,
// and the stale slots, in `table` (the step's, which begins with the graph's), and relinks the
// dependencies. Returns the stale slots' ids (empty without staleness).
std::vector<int> insert_sync(Schedule& schedule, std::vector<TensorInfo>& table, const Graph& graph,
                             const BucketPlan& plan, const SyncOptions& options);

}  // namespace dlb
