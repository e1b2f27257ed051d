// Runs a schedule (docs/architecture.md, "The step"): each pass in list order (a valid order of
// its dependencies), handed to its runner: layer passes to the graph, the loss to LossPass,
// the sync policy's passes to the policy. Each runner issues its pass on the pass's lane, and the
// lanes' rules alone order one lane after another (runtime/nn/lane_order.h): build_step refuses a
// program whose edges, within an iteration and into earlier ones, they leave unordered. Each pass
// is an NVTX range; while an observer wants them, the executor takes the pass's start and end marks
// on the run's clock and hands them over with the pass's lane. Tracing is such an observer; so is a
// replay on a virtual clock (runtime/train/replay.h). The executor knows no backend beyond the
// context it passes on.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "runtime/core/clock.h"
#include "runtime/nn/layer.h"
#include "runtime/nn/schedule.h"

namespace dlb {

struct PassRunners {
  PassRunner* layers = nullptr;  // forward, backward_data, backward_weights, backward, accumulate
  PassRunner* loss = nullptr;
  PassRunner* sync = nullptr;  // Pass::kSync
  PassRunner* swap = nullptr;  // swap_out, swap_in, swap_wait (runtime/nn/swap.h)
};

class PassObserver {
 public:
  virtual ~PassObserver() = default;
  // Whether the passes about to run are wanted (a device clock's mark is an event).
  virtual bool wants_marks() const = 0;
  // A pass has been issued: `start` and `end` are marks of the clock around it (on a GPU,
  // events on the compute stream; where the work runs on another lane, that lane's own marks
  // are its runner's to report).
  virtual void pass_ran(const Step& step, const PassRunner& runner, const Mark& start,
                        const Mark& end) = 0;
};

class Executor {
 public:
  // Every runner the schedule's passes need must be set; `clock` must outlive the executor.
  Executor(Schedule schedule, PassRunners runners, const Clock& clock);
  // A schedule shared with other executors (a simulator's ranks replay one schedule each).
  Executor(std::shared_ptr<const Schedule> schedule, PassRunners runners, const Clock& clock);
  // Step `index` of the schedule (the caller's count of steps; each runner is told it first,
  // PassRunner::begin_step). `ctx`: what the passes compute with (null in a replay); under
  // --memory-guard its backend's zones are checked after every pass.
  void run(int64_t index, const LayerContext* ctx, PassObserver* observer = nullptr);
  const Schedule& schedule() const { return *schedule_; }
  const Clock& clock() const { return clock_; }

 private:
  PassRunner& runner_for(const Step& step) const;
  // "backward_data of layer1.0.conv1", "allreduce of bucket 3": for messages.
  std::string describe(const Step& step) const;

  std::shared_ptr<const Schedule> schedule_;
  PassRunners runners_;
  const Clock& clock_;
  std::vector<std::string> described_;  // describe() of each step, made once
};

}  // namespace dlb
