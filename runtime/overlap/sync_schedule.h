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
// Independent ranks (SyncOptions::independent; --sync=independent): after backward the ranks
// meet, an all-reduce of one token of the table and its wait (Step::arg kMeeting), and then every
// bucket's update from the rank's own gradients, which no rank sends. The ranks run their steps
// in step with each other, as synchronous ones do, without the gradients' traffic; with one rank
// it is the plain step.
//
// Asynchronous SGD (SyncOptions::async; --sync=async; runtime/overlap/param_server.h): a pull
// before the first forward pass, a push after backward, and a progress pass after each forward
// and backward pass, in which rank 0 serves the other ranks' pushes. No update: the parameter
// server applies the gradients. The overlap strategy is none, and no loss scaling. The server's
// copies are tensors of the table, in host memory (MemCategory::kHostComm) and kept across steps
// (AsyncTensors), and the passes name them: a pull reads the reply (rank 0: the master weights)
// and writes the parameters; a push reads the gradients and writes their host copy (and the
// reply the server will send); rank 0's push and progress passes also write the master weights,
// their momentum and the replies.
#pragma once
#include <vector>

#include "runtime/nn/graph.h"
#include "runtime/nn/schedule.h"
#include "runtime/overlap/bucket_plan.h"
#include "runtime/overlap/strategy.h"
#include "runtime/trace/tracer.h"

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
// A kAllReduce's or kWait's bucket (Step::arg) that is independent ranks' meeting: the token.
inline constexpr int kMeeting = -3;
// The buffer a reduction moves, as its bytes are counted (reduction_bytes, runtime/sim): its
// bucket, the whole buffer (-1, which a stale slot is laid out as), or kMeeting; every such key of
// `buckets` buckets, in that order: kMeeting, -1, 0 ... buckets - 1.
inline int reduced_buffer(const Step& all_reduce) {
  return all_reduce.arg == kStaleSlot ? -1 : all_reduce.arg;
}
inline std::vector<int> reduced_buffers(size_t buckets) {
  std::vector<int> keys = {kMeeting, -1};
  for (size_t b = 0; b < buckets; ++b) keys.push_back(static_cast<int>(b));
  return keys;
}
// The bucket a sync pass's trace span names (Span::bucket): its own, the meeting, or every
// bucket (the whole buffer, or a stale slot, laid out as it).
inline int traced_bucket(const Step& step) {
  return step.arg == kMeeting ? kMeetingBucket : step.arg < 0 ? kEveryBucket : step.arg;
}
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
  int64_t ranks = 1;  // the step's ranks: more than one reduces
  bool distributed() const { return ranks > 1; }
  // The optimizer's first update of a step reads every gradient (Optimizer::
  // reads_all_gradients_first): every wait goes before it.
  bool updates_read_all_gradients = false;
  // Bounded staleness: K >= 1 slots (above); 0: none.
  int64_t staleness = 0;
  // Asynchronous SGD through a parameter server (above), as rank `rank` of `ranks`: rank 0's
  // table holds the server's tensors (AsyncTensors).
  bool async = false;
  int64_t rank = 0;
  // Independent ranks (above): they meet after backward and reduce no gradients.
  bool independent = false;
};

// Asynchronous SGD's host tensors, by id in the step's table (-1: none). Every rank: the
// gradients it pushes (numel of the flat buffer). The other ranks: the reply they pull (the
// weights, then the epoch's word: numel + 1). Rank 0, the server: the master weights (with the
// word), their momentum, and a reply per other rank (replies[r], r >= 1; replies[0] is -1).
struct AsyncTensors {
  int grads = -1, reply = -1, master = -1, momentum = -1;
  std::vector<int> replies;
};

// What insert_sync declares in the table.
struct SyncTensors {
  std::vector<int> stale_slots;  // bounded staleness: the K slots (empty without)
  AsyncTensors async;            // asynchronous SGD (all -1 without)
  int meeting = -1;              // independent ranks: the token they reduce (-1 without)
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
// the stale slots, independent ranks' token and asynchronous SGD's host tensors in `table` (the
// step's, which begins with the graph's), and relinks the dependencies.
SyncTensors insert_sync(Schedule& schedule, std::vector<TensorInfo>& table, const Graph& graph,
                        const BucketPlan& plan, const SyncOptions& options);

}  // namespace dlb
