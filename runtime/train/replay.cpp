#include "runtime/train/replay.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "runtime/core/clock.h"
#include "runtime/overlap/sync_schedule.h"
#include "runtime/train/executor.h"

namespace dlb {

namespace {

// What the runners and the observer share: the clock, the cost model and the timeline.
struct ReplayState {
  VirtualClock clock;
  const PassCost& cost;
  std::vector<TimedPass> timeline;
  int64_t iteration = 0;
  const Schedule* schedule = nullptr;  // the executor's: the steps it hands the runners
  size_t index_of(const Step& step) const {
    return static_cast<size_t>(&step - schedule->steps.data());
  }
  void add(const Step& step, double start, double end) {
    timeline.push_back({iteration, index_of(step), step.lane, start, end});
  }
};

const std::string kComputeLabel = "pass", kSyncLabel = "sync";

// Layer passes and the loss: their cost on the host's timeline.
class ComputeRunner final : public PassRunner {
 public:
  explicit ComputeRunner(ReplayState& state) : state_(state) {}
  void run_pass(const Step& step, const LayerContext*) override {
    state_.clock.advance_us(state_.cost(step));
  }
  const std::string& label(const Step&) const override { return kComputeLabel; }

 private:
  ReplayState& state_;
};

// The sync policy's passes, with reductions on the comm lane (see replay.h).
class SyncRunner final : public PassRunner {
 public:
  explicit SyncRunner(ReplayState& state) : state_(state) {}
  void run_pass(const Step& step, const LayerContext*) override {
    const int b = step.arg;
    switch (sync_pass_of(step)) {
      case SyncPass::kAllReduce: {
        const double start = std::max(state_.clock.now_us(), comm_free_);
        comm_free_ = start + state_.cost(step);
        state_.add(step, start, comm_free_);
        reduced_at_[b] = comm_free_;
        pending_[b] = true;
        return;
      }
      case SyncPass::kWait: {
        auto it = reduced_at_.find(b);
        if (it == reduced_at_.end()) return;
        state_.clock.advance_us(std::max(it->second - state_.clock.now_us(), 0.0));
        reduced_at_.erase(it);
        return;
      }
      case SyncPass::kUpdateCarried:
        if (!pending_[b]) {
          skipped_ = true;
          return;
        }
        [[fallthrough]];
      case SyncPass::kUpdate:
        pending_[b] = false;
        [[fallthrough]];
      case SyncPass::kProgress:
        state_.clock.advance_us(state_.cost(step));
        return;
    }
  }
  const std::string& label(const Step&) const override { return kSyncLabel; }
  // A skipped carried update is not in the timeline; nor is an all-reduce's launch (its
  // reduction is, on the comm lane).
  bool take_unrecorded(const Step& step) {
    const bool launch = step.pass == Pass::kSync && sync_pass_of(step) == SyncPass::kAllReduce;
    return launch || std::exchange(skipped_, false);
  }

 private:
  ReplayState& state_;
  double comm_free_ = 0;
  std::map<int, double> reduced_at_;  // reductions not yet waited for: when they end
  std::map<int, bool> pending_;       // reduced, not yet applied
  bool skipped_ = false;
};

class Timeline final : public PassObserver {
 public:
  Timeline(ReplayState& state, SyncRunner& sync) : state_(state), sync_(sync) {}
  bool wants_marks() const override { return true; }
  void pass_ran(const Step& step, const PassRunner&, const Mark& start, const Mark& end) override {
    if (step.pass == Pass::kSync && sync_.take_unrecorded(step)) return;
    state_.add(step, start.us, end.us);
  }

 private:
  ReplayState& state_;
  SyncRunner& sync_;
};

}  // namespace

std::vector<TimedPass> replay(const Schedule& schedule, const PassCost& cost, int64_t iterations) {
  ReplayState state{{}, cost, {}, 0};
  ComputeRunner compute(state);
  SyncRunner sync(state);
  Timeline timeline(state, sync);
  Executor executor(schedule, PassRunners{&compute, &compute, &sync, &compute}, state.clock);
  state.schedule = &executor.schedule();
  for (; state.iteration < iterations; ++state.iteration) executor.run(nullptr, &timeline);
  return state.timeline;
}

}  // namespace dlb
