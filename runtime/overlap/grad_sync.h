// Gradient synchronisation at run time (docs/architecture.md): the all-reduce
// and update steps that insert_sync (sync_schedule.h) put into the schedule, run here. A bucket's
// all-reduce starts after the work queued on the backend's stream (its gradients), and its update
// is queued after CommHandle::order_before. On the CPU both are the host and order_before waits;
// on a GPU they are event waits between the compute and comm streams, with no host
// synchronisation inside the step. MPI's non-blocking collectives progress only inside MPI
// calls, so in-flight all-reduces are polled between passes (poll()).
#pragma once
#include <memory>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/comm/communicator.h"
#include "runtime/optim/optimizer.h"
#include "runtime/overlap/bucket_plan.h"
#include "runtime/overlap/strategy.h"
#include "runtime/trace/tracer.h"

namespace dlb {

class GradSync {
 public:
  // `flat_gradients` holds every gradient in the order of the optimizer's parameters, which is
  // the plan's order.
  GradSync(Tensor flat_gradients, Communicator& comm, Backend& backend, Optimizer& optimizer,
           BucketPlan plan);

  void set_tracer(Tracer* tracer) { tracer_ = tracer; }
  bool distributed() const { return comm_.size() > 1; }
  const BucketPlan& plan() const { return plan_; }

  // An all-reduce step: launches bucket b's reduction (b = -1: the whole buffer at once, ordered
  // before the stream's later work right away, as the `none` strategy does).
  void all_reduce(int bucket);
  // An update step. from_previous_step: the forward strategy's update at the next step's forward,
  // which applies only a pending reduction's result, and while bucket b's reduction is still in
  // flight applies the updates of buckets already reduced (in bucket order): the wait for the
  // front layers' bucket, reduced last, then hides them. Otherwise the bucket updates now.
  void update(int bucket, bool from_previous_step);
  // Progresses reductions in flight and records the spans of those that finished.
  void poll();
  // Completes every pending reduction and update (the end of a run, before reading weights).
  void flush();

 private:
  // What a reduction's span needs, taken at launch: whether the tracer wants it (decided then,
  // since a GPU's reduction may be noticed finished steps later), the step, and the host's
  // reading (used when the handle has no device marks).
  struct Launch {
    bool traced = false;
    int64_t step = 0;
    Mark host;
  };
  struct State {
    std::unique_ptr<CommHandle> handle;
    Launch launched;
    bool reduced = true;   // no reduction in flight
    bool pending = false;  // reduced gradients not yet applied
  };
  std::unique_ptr<CommHandle> launch(int64_t begin, int64_t count, Launch& launched);
  void complete(size_t b);     // order its update after its all-reduce
  bool reduced_now(size_t b);  // completes it if its all-reduce has finished; never waits
  void apply(size_t b);        // the optimizer over the bucket's parameters
  void finishing(std::unique_ptr<CommHandle> handle, const Launch& launched, int64_t values);
  void record_finished();  // record the spans of the reductions known to have finished

  Tensor flat_;
  Communicator& comm_;
  Backend& backend_;
  Optimizer& optimizer_;
  BucketPlan plan_;
  std::vector<State> state_;
  Tracer* tracer_ = nullptr;
  // Reductions ordered before their updates whose end time is not yet known (on a GPU: until
  // a later poll finds their event complete).
  struct Finishing {
    std::unique_ptr<CommHandle> handle;
    Launch launched;
    int64_t values = 0;  // gradient values reduced (the bucket's, without alignment gaps)
  };
  std::vector<Finishing> finishing_;
};

}  // namespace dlb
