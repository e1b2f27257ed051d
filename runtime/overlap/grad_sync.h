// Gradient synchronisation at run time (docs/architecture.md): the runner of the passes that
// insert_sync (sync_schedule.h) puts into the schedule, each run as it comes. A bucket's
// all-reduce starts after the work queued on the backend's stream (its gradients); its wait is
// CommHandle::order_before, so the update queued after it runs after the reduction. On the CPU
// both are the host and the wait blocks; on a GPU it is an event wait between the comm and
// compute streams, with no host synchronisation inside the step. MPI's non-blocking collectives
// progress only inside MPI calls: the schedule's progress passes poll the reductions in flight.
#pragma once
#include <memory>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/comm/communicator.h"
#include "runtime/nn/graph.h"
#include "runtime/nn/schedule.h"
#include "runtime/optim/optimizer.h"
#include "runtime/overlap/bucket_plan.h"
#include "runtime/overlap/strategy.h"
#include "runtime/trace/tracer.h"

namespace dlb {

class GradSync final : public PassRunner {
 public:
  // The runner of `schedule`'s sync passes over `graph`, bound as `step`: what each bucket's
  // passes reduce and update is what their tensors name (buckets_of, sync_schedule.h), a slice of
  // the model's flat gradient buffer and the optimizer's parameters (the graph's flat order).
  // `stale_slots`: bounded staleness's K slots, each laid out as the flat buffer; empty without.
  // `meeting`: independent ranks' token (kMeeting's reduction); undefined without.
  GradSync(const Graph& graph, const BoundStep& step, const Schedule& schedule, Communicator& comm,
           Backend& backend, Optimizer& optimizer, std::vector<Tensor> stale_slots = {},
           Tensor meeting = {});

  void set_tracer(Tracer* tracer) { tracer_ = tracer; }
  bool distributed() const { return comm_.size() > 1; }

  // Bounded staleness: the step's slot is stale_slot(index, K) (sync_schedule.h).
  void begin_step(int64_t index) override;
  // Runs one of the policy's passes (sync_schedule.h).
  void run_pass(const Step& step, const LayerContext* ctx) override;
  const std::string& label(const Step& step) const override;
  // Only updates that ran are spans of the compute lane: a reduction's span is its own, from
  // the communicator's marks (record_finished), and a wait or progress pass is not work. (Asked
  // of the pass that just ran.)
  bool traced(const Step& step) const override;
  // Completes every reduction in flight, then every pending update (the end of a run, before
  // reading weights). With staleness, the slots' gradients are applied oldest first: every
  // step's gradients have been applied once after a flush.
  void flush();

 private:
  // What a reduction's span needs, taken at launch: whether the tracer wants it (decided then,
  // since a GPU's reduction may be noticed finished steps later), the step, and the host's
  // reading (used when the handle has no device marks).
  struct Launch {
    bool traced = false;
    int64_t step = 0;
    int bucket = kEveryBucket;  // the bucket reduced (tracer.h)
    Mark host;
  };
  struct State {
    std::unique_ptr<CommHandle> handle;
    Launch launched;
    bool reduced = true;   // no reduction in flight
    bool pending = false;  // reduced gradients not yet applied
  };
  // Launches the reduction of `what` (a bucket's slice of the flat buffer, all of it, or a slot).
  std::unique_ptr<CommHandle> launch(int bucket, Tensor what, Launch& launched);
  // Launches bucket b's reduction (b = -1: the whole buffer at once).
  void all_reduce(int bucket);
  // Independent ranks: their meeting, a reduction of the token and no gradients.
  void meet();
  // Orders the work queued from now on after bucket b's reduction (b = -1: the whole buffer's).
  void wait(int bucket);
  // The optimizer over the bucket's parameters. carried: the forward strategy's update in the
  // next step, which does nothing where no reduction has happened since the last update.
  void update(int bucket, bool carried);
  // Progresses reductions in flight and records the spans of those that finished.
  void poll();
  void complete(State& s, int64_t values);  // order what follows after its all-reduce
  void apply(size_t b);
  void finishing(std::unique_ptr<CommHandle> handle, const Launch& launched, int64_t values);
  void record_finished();  // record the spans of the reductions known to have finished
  // Bounded staleness: the step's slot.
  void stash();
  void update_stale();
  void all_reduce_slot();  // and the next step's slot
  void apply_slot(size_t slot);

  Tensor flat_;
  Communicator& comm_;
  Backend& backend_;
  Optimizer& optimizer_;
  BucketPlan plan_;  // buckets_of the schedule
  std::vector<State> state_;
  State whole_;  // the `none` strategy's one reduction of the whole buffer
  // Independent ranks: the token they reduce to meet (zeroed when GradSync is made), its state.
  Tensor meeting_token_;
  State meeting_;
  bool skipped_ = false;  // the last update was a carried one with nothing to apply
  Tracer* tracer_ = nullptr;
  // Reductions ordered before their updates whose end time is not yet known (on a GPU: until
  // a later poll finds their event complete).
  struct Finishing {
    std::unique_ptr<CommHandle> handle;
    Launch launched;
    int64_t values = 0;  // gradient values reduced (the bucket's, without alignment gaps)
  };
  std::vector<Finishing> finishing_;
  // Bounded staleness: the slots, their reductions, whether each holds gradients not yet
  // applied, the step's slot and the next step's index (whose slot holds the oldest gradients).
  std::vector<Tensor> slots_;
  std::vector<State> slot_state_;
  std::vector<bool> slot_filled_;
  size_t slot_ = 0;
  int64_t next_step_ = 0;
  int64_t all_values_ = 0;  // every bucket's values: a slot's, without gaps
};

}  // namespace dlb
