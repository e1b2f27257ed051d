// The multi-rank simulator (runtime/sim/simulator.h) on the replay test's step (fc1 -> relu ->
// fc2, two buckets, runtime/train/replay.h's costs): ranks of one speed give one rank's replay,
// the scaling-loss parts add up to the step, and a straggler's time is the others' wait.
#include "runtime/sim/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/core/error.h"
#include "runtime/nn/layers/elementwise.h"
#include "runtime/nn/layers/linear.h"
#include "runtime/overlap/sync_schedule.h"

namespace dlb {
namespace {

class Simulate : public ::testing::Test {
 public:
  void SetUp() override {
    g.add("fc1", std::make_unique<Linear>(8, 8), {g.input()});
    g.add("relu", std::make_unique<Relu>(), {g.output()});
    g.add("fc2", std::make_unique<Linear>(8, 4), {g.output()});
    g.declare(PrecisionPolicy{}, BackendTraits{});
    const auto& at = g.grad_offsets();
    const int64_t end = g.tensor_infos()[g.flat_gradient_id()].shape.numel();
    plan.buckets = {{0, 2, at[0], at[2] - at[0], 8 * 4 + 4}, {2, 2, at[2], end - at[2], 8 * 8 + 8}};
    plan.bucket_of = {0, 0, 1, 1};
  }

  Schedule schedule(OverlapStrategy strategy, bool distributed) {
    Schedule s = g.forward_schedule();
    Step loss;
    loss.pass = Pass::kLoss;
    loss.node = g.output();
    loss.reads = {g.output_id(g.output())};
    loss.writes = {g.grad_id(g.output())};
    s.steps.push_back(loss);
    const auto& bw = g.backward_schedule().steps;
    s.steps.insert(s.steps.end(), bw.begin(), bw.end());
    insert_sync(s, g, plan, SyncOptions{strategy, distributed, false});
    return s;
  }

  // As replay_test's: forward 10 per layer, loss 5, each backward pass 20, a bucket's reduction
  // 50 (the whole buffer's 100), an update 4, a progress pass 1.
  static double cost(const Step& s) {
    switch (s.pass) {
      case Pass::kForward:
        return 10;
      case Pass::kLoss:
        return 5;
      case Pass::kSync:
        switch (sync_pass_of(s)) {
          case SyncPass::kAllReduce:
            return s.arg < 0 ? 100 : 50;
          case SyncPass::kProgress:
            return 1;
          case SyncPass::kWait:
            return 0;
          default:
            return 4;
        }
      default:
        return 20;
    }
  }

  Simulation run(OverlapStrategy strategy, SimulateOptions o) {
    return simulate(schedule(strategy, o.ranks > 1), schedule(strategy, false), cost, o);
  }

  Graph g{Shape{2, 8}};
  BucketPlan plan;
};

// The steady step of one rank's replay: between the ends of its last two iterations' passes
// on the compute and host lanes.
double replayed_step(const Schedule& s, int64_t iterations) {
  std::vector<double> end(static_cast<size_t>(iterations), 0.0);
  for (const TimedPass& t : replay(s, Simulate::cost, iterations)) {
    if (t.lane != Lane::kComm) end[t.iteration] = std::max(end[t.iteration], t.end_us);
  }
  return end[iterations - 1] - end[iterations - 2];
}

void expect_parts_add_up(const ScalingLoss& l) {
  EXPECT_NEAR(l.step_us - l.one_rank_us,
              l.exposed_comm_us + l.waiting_for_slowest_us + l.compute_slowdown_us + l.rest_us,
              1e-9);
}

TEST_F(Simulate, RanksOfOneSpeedAreOneRanksReplay) {
  for (OverlapStrategy strategy :
       {OverlapStrategy::kNone, OverlapStrategy::kBackward, OverlapStrategy::kForward}) {
    SimulateOptions o;
    o.ranks = 1024;
    o.iterations = 4;
    const Simulation sim = run(strategy, o);
    EXPECT_EQ(sim.replayed_ranks, 1);
    ASSERT_EQ(sim.step_us.size(), 4u);
    EXPECT_DOUBLE_EQ(sim.mean_step_us, replayed_step(schedule(strategy, true), 6))
        << overlap_name(strategy);
    expect_parts_add_up(sim.loss);
  }
}

TEST_F(Simulate, TheBackwardStrategysLossIsItsExposedWaitAndProgressPasses) {
  // One rank: forward 30, loss 5, backward 80, updates 8 = 123. Two: replay_test's timeline,
  // 179 a step: the waits for bucket 0 (117-125) and bucket 1 (129-175) expose 54 us of
  // communication, and the two progress passes are the rest.
  SimulateOptions o;
  o.ranks = 2;
  const Simulation sim = run(OverlapStrategy::kBackward, o);
  EXPECT_DOUBLE_EQ(sim.loss.one_rank_us, 123);
  EXPECT_DOUBLE_EQ(sim.loss.step_us, 179);
  EXPECT_DOUBLE_EQ(sim.loss.exposed_comm_us, 54);
  EXPECT_DOUBLE_EQ(sim.loss.waiting_for_slowest_us, 0);
  EXPECT_DOUBLE_EQ(sim.loss.compute_slowdown_us, 0);
  EXPECT_DOUBLE_EQ(sim.loss.rest_us, 2);
}

TEST_F(Simulate, AStragglersExtraTimeIsTheOtherRanksWait) {
  // Rank 1 computes at half speed: 246 us of passes and 2 of progress a step. Everyone's step is
  // its; rank 0 waits for it. The ranks' mean compute is (123 + 246) / 2: 61.5 us of slowdown.
  SimulateOptions o;
  o.ranks = 2;
  o.speeds.straggler = 1;
  o.speeds.straggler_factor = 2;
  const Simulation sim = run(OverlapStrategy::kNone, o);
  EXPECT_EQ(sim.replayed_ranks, 2);
  EXPECT_DOUBLE_EQ(sim.loss.compute_slowdown_us, 61.5);
  EXPECT_GT(sim.loss.waiting_for_slowest_us, 0);
  // none: the straggler's step is its compute and the whole buffer's reduction.
  EXPECT_DOUBLE_EQ(sim.mean_step_us, 246 + 100);
  expect_parts_add_up(sim.loss);
}

TEST_F(Simulate, JitteredRanksWaitForTheSlowestDrawEachStep) {
  SimulateOptions o;
  o.ranks = 64;
  o.iterations = 10;
  o.speeds.jitter = {0.8, 1.2};
  const Simulation sim = run(OverlapStrategy::kBackward, o);
  EXPECT_EQ(sim.replayed_ranks, 64);
  // With 64 ranks some rank draws 1.2 in nearly every step: the step is the slow rank's.
  SimulateOptions slow = o;
  slow.speeds.jitter = {1.2};
  EXPECT_NEAR(sim.mean_step_us, run(OverlapStrategy::kBackward, slow).mean_step_us, 1e-9);
  EXPECT_GT(sim.loss.waiting_for_slowest_us, 0);
  expect_parts_add_up(sim.loss);
  // The same seed, the same draws.
  EXPECT_EQ(run(OverlapStrategy::kBackward, o).step_us, sim.step_us);
}

TEST_F(Simulate, RefusesWhatCannotBeSimulated) {
  SimulateOptions o;
  o.ranks = 0;
  EXPECT_THROW(run(OverlapStrategy::kNone, o), InvalidArgument);
  o.ranks = 4;
  o.speeds.straggler = 4;
  o.speeds.straggler_factor = 2;
  EXPECT_THROW(run(OverlapStrategy::kNone, o), InvalidArgument);
  o.speeds.straggler = 1;
  o.speeds.straggler_factor = 0.5;
  EXPECT_THROW(run(OverlapStrategy::kNone, o), InvalidArgument);
}

}  // namespace
}  // namespace dlb
