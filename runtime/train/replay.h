// A replay of a schedule on a virtual clock: the seam a what-if simulator implements
// (runtime/sim/). The real Executor runs the schedule, but its runners compute nothing: each pass
// advances a VirtualClock by the time a cost model gives it, and the sync policy's reductions run
// on a comm lane. The model, as the CPU backend with a progress thread runs a step (and as a
// GPU's compute and comm streams do):
//   - passes on the compute, copy and host lanes run one after another, in schedule order (a
//     swap's copy too: this model does not overlap copies with compute);
//   - an all-reduce is launched where the schedule issues it; when it starts and ends is the
//     comm lane's to say (ReductionLane): on one rank's own lane, when it is launched or when the
//     reduction before it ends, whichever is later, taking its cost while the other lanes go on;
//   - a wait ends when its reductions have ended (at once if they already have) and costs
//     nothing more: the all-reduces its edges name (Step::after, and Step::carried into an
//     earlier iteration), as the lanes' rules have it (runtime/nn/lane_order.h);
//   - where the reductions run on the cores that compute (CoreSharing), the two share them;
//   - an update of carried gradients (the forward strategy's) runs only when a reduction has
//     happened since the bucket's last update, as GradSync's does: not in the first iteration;
//   - bounded staleness: iteration i's stale passes are those of its slot (stale_slot(i, K),
//     runtime/overlap/sync_schedule.h): its wait ends when the slot's reduction, launched K
//     iterations before, has; its update runs only where a stash has filled the slot since (not
//     in the first K iterations); the stash is a compute pass;
//   - asynchronous SGD: a rank's pull waits for the reply to its last push (none before its first
//     push); its push sends its gradients to the parameter server (ServerLane) after the push's
//     own cost (the copy to the host); rank 0 applies its own push's gradients, and serves the
//     others' pushes after each progress pass and after its push, as runtime/overlap/
//     param_server.h's rank 0 does. Its serving is its progress time; its applying, busy time.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/core/clock.h"
#include "runtime/core/core_sharing.h"
#include "runtime/core/lane.h"
#include "runtime/nn/schedule.h"

namespace dlb {

struct TimedPass {
  int64_t iteration = 0;
  size_t index = 0;  // in the schedule
  Lane lane = Lane::kCompute;
  double start_us = 0, end_us = 0;
};

// Microseconds a pass takes on its lane (a wait's is ignored: it lasts until its reduction ends).
using PassCost = std::function<double(const Step& step)>;

// How a step's all-reduces share the cores that compute (runtime/core/core_sharing.h), each
// reduction's own; none where absent. The replay models it as the cores' sharing: while
// reductions run beside compute, the compute goes at 1 - rho of its speed and the reductions at
// 1/stretch of theirs, rho = lost / stretch; once the rank waits, the reductions have the cores.
// Reductions launched before those in flight are settled join them (their sharing weighted by
// their times alone). With W the work left of them (their time alone on the lane, from the
// group's launch) and K the rank's compute since:
//   - at a launch, where K > 0 and K >= (1 - rho) stretch W (they ended beside the compute), or
//     rho >= 1 (the compute stops while they run), the rank loses min(lost, stretch) x W, as a
//     wait; otherwise they go on;
//   - at a wait for one of them, the same where they ended; otherwise the compute took
//     K / (1 - rho) (K rho / (1 - rho) lost, as a wait) while they did K / ((1 - rho) stretch)
//     of their work, and the one waited for ends when the work up to its end is done, at full
//     speed; those after it go on beside the compute that follows, a flight of their own.
// A rank that only waits loses nothing beyond the reductions. The lane keeps each reduction's
// time alone: a late end delays the rank's own waits, not the reductions after it on the lane.
using SharingOf = std::function<CoreSharing(const Step& all_reduce)>;

// Where a replay's reductions run. A rank numbers its reductions from 0, in the order it launches
// them, over every iteration; ranks of one step launch the same reductions in the same order.
class ReductionLane {
 public:
  virtual ~ReductionLane() = default;
  // Reduction `n` (an all-reduce step, costing `cost_us`) launched at `launch_us` on the rank's
  // clock: when it starts and when it ends, as far as the lane knows now.
  virtual std::pair<double, double> launch(int64_t n, double cost_us, double launch_us) = 0;
  // When reduction `n` ends (it has been launched).
  virtual double end_us(int64_t n) const = 0;
};

// Asynchronous SGD's parameter server as a replay sees it (runtime/overlap/param_server.h): rank 0
// serves the other ranks' pushes; another rank's pull waits for the reply to its last push.
class ServerLane {
 public:
  virtual ~ServerLane() = default;
  // Rank `rank` (not 0) has sent its gradients at `sent_us` on its clock.
  virtual void push(int64_t rank, double sent_us) = 0;
  // When the reply to rank `rank`'s last push reaches it. Asked only once that push has been
  // served: a simulator runs a rank's next iteration only then (runtime/sim/simulator.h).
  virtual double reply_us(int64_t rank) const = 0;
  // Rank 0 applies its own gradients from `now_us`: when it is done.
  virtual double apply_own(double now_us) = 0;
  // Rank 0, from `now_us`, serves the pushes that have reached it, and those that reach it while
  // it serves, as many as there are other ranks at most: when it is done.
  virtual double serve(double now_us) = 0;
};

// What one rank's replay shares with the other ranks'.
struct RankLanes {
  ReductionLane* reductions = nullptr;  // the sync policy's all-reduces
  ServerLane* server = nullptr;         // asynchronous SGD's pushes
  int64_t rank = 0;                     // asynchronous SGD: rank 0 is the server
};

// One rank's own comm lane: a reduction starts when launched or when the one before it ends.
class OwnReductionLane final : public ReductionLane {
 public:
  std::pair<double, double> launch(int64_t n, double cost_us, double launch_us) override;
  double end_us(int64_t n) const override { return ends_.at(n); }

 private:
  double free_us_ = 0;
  std::map<int64_t, double> ends_;
};

// One rank's replay, an iteration at a time. Its compute, copy and host passes cost the cost
// model's time times the iteration's factor (a rank's speed); reductions are the lane's, and the
// parameter server's work its own (not scaled).
class RankReplay {
 public:
  // `keep_timeline`: record every pass (a trace); otherwise only the totals are kept.
  // `sharing`: how its reductions share the cores that compute (SharingOf; none where empty);
  // what the rank loses to them is a wait.
  // A lane the schedule's passes need and `lanes` lacks is std::logic_error when the pass runs;
  // a schedule of asynchronous SGD without a server, Unsupported.
  // `schedule` is shared: the simulator's ranks replay one.
  RankReplay(std::shared_ptr<const Schedule> schedule, PassCost cost, RankLanes lanes,
             bool keep_timeline, SharingOf sharing = nullptr);
  ~RankReplay();
  RankReplay(const RankReplay&) = delete;
  RankReplay& operator=(const RankReplay&) = delete;

  void run_iteration(double factor = 1);

  // Time on this rank's lanes other than the comm lane since the replay began: the passes' costs
  // (busy; the sync policy's progress passes apart, which one rank does not run), and the waits
  // for reductions (waited).
  struct Totals {
    double busy_us = 0, progress_us = 0, waited_us = 0;
  };
  // The rank between iterations (its clock, its reductions in flight, its totals), to run an
  // iteration again from: a simulator of many ranks runs an iteration until the reductions'
  // times, which depend on every rank's launches, settle.
  struct State;
  std::shared_ptr<const State> save() const;
  void restore(const State& state);

  double now_us() const;
  Totals totals() const;
  int64_t iterations() const;
  int64_t reductions() const;  // launched so far
  const std::vector<TimedPass>& timeline() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// `iterations` iterations of `schedule` on one rank's own comm lane, one after another: every pass
// that ran, in the order it was issued (a skipped carried update is absent). A reduction's times
// are the comm lane's. Asynchronous SGD needs ranks and a server: Unsupported here.
std::vector<TimedPass> replay(const Schedule& schedule, const PassCost& cost, int64_t iterations);

}  // namespace dlb
