// The multi-rank simulator (runtime/sim/simulator.h) on the replay test's step (fc1 -> relu ->
// fc2, two buckets, runtime/train/replay.h's costs): ranks of one speed give one rank's replay,
// the scaling-loss parts add up to the step, and a straggler's time is the others' wait.
#include "runtime/sim/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "runtime/core/error.h"
#include "tests/unit/fc_step.h"

namespace dlb {
namespace {

class Simulate : public ::testing::Test, protected FcStep {
 protected:
  Simulation run(OverlapStrategy strategy, SimulateOptions o) {
    return simulate(schedule(strategy, o.ranks > 1), schedule(strategy, false), cost, o);
  }
};

// The steady step of one rank's replay: between the ends of its last two iterations' passes
// on the compute and host lanes.
double replayed_step(const Schedule& s, int64_t iterations) {
  std::vector<double> end(static_cast<size_t>(iterations), 0.0);
  for (const TimedPass& t : replay(s, FcStep::cost, iterations)) {
    if (t.lane != Lane::kComm) end[t.iteration] = std::max(end[t.iteration], t.end_us);
  }
  return end[iterations - 1] - end[iterations - 2];
}

SharingOf every_reduction(CoreSharing sharing) {
  return [sharing](const Step&) { return sharing; };
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

TEST_F(Simulate, WhatAReductionTakesFromComputeIsLostAtTheRanksNextLaunchOrWait) {
  // Half of each 50 us reduction's time is lost (stretch 1): bucket 0's (75-125) runs beside 40
  // of backward (relu, fc1; more than the 25 it takes), so bucket 1's launch at 117 first loses
  // 25. Bucket 1's runs 142-192; bucket 0's update (142-146) runs beside it, and the wait for it
  // settles that: the 4 took 8, 4 lost (to 150), and the 8 us of reduction done leave 42 (to
  // 192), then bucket 1's update to 196. Exposed: 25 + 4 + 42. All of it (lost 1): each
  // reduction's 50 us is lost, 75-125 at 117 (to 167) and 167-217 at bucket 1's wait (from 171),
  // and the backward strategy is no better than none (223) but for its progress passes.
  SimulateOptions o;
  o.ranks = 2;
  o.comm_sharing = every_reduction({0.5, 1});
  Simulation sim = run(OverlapStrategy::kBackward, o);
  EXPECT_DOUBLE_EQ(sim.loss.step_us, 196);
  EXPECT_DOUBLE_EQ(sim.loss.exposed_comm_us, 71);
  EXPECT_DOUBLE_EQ(sim.loss.rest_us, 2);
  o.comm_sharing = every_reduction({1, 1});
  sim = run(OverlapStrategy::kBackward, o);
  EXPECT_DOUBLE_EQ(sim.loss.step_us, 225);
  EXPECT_DOUBLE_EQ(sim.loss.exposed_comm_us, 100);
  EXPECT_DOUBLE_EQ(run(OverlapStrategy::kNone, o).loss.step_us, 223);
}

TEST_F(Simulate, AReductionBesideComputeSharesItsCoresAndHasThemWhenTheRankWaits) {
  // Lost 1 per us and stretch 2: beside compute each goes at half speed (rho 0.5), so compute
  // and reductions share one core's time: the step is their sum, 123 + 100 + the 2 us of
  // progress. Bucket 0's reduction (launched at 75) has not ended when bucket 1's is launched at
  // 117 (40 of compute at half speed is 80 us): one flight, 100 us of work alone. The wait for
  // bucket 0 settles it: the 40 took 80 (40 lost, to 157), the reductions did 40 of their work,
  // and bucket 0's 10 left end at 167. Bucket 1's 50 go on beside bucket 0's update (167-171);
  // the wait for bucket 1 settles that: 4 lost (to 175), 46 left (to 221), its update to 225.
  SimulateOptions o;
  o.ranks = 2;
  o.comm_sharing = every_reduction({1, 2});
  Simulation sim = run(OverlapStrategy::kBackward, o);
  EXPECT_DOUBLE_EQ(sim.loss.step_us, 225);
  EXPECT_DOUBLE_EQ(sim.loss.exposed_comm_us, 100);
  // A rank that only waits loses nothing beyond the reduction, however much compute beside it
  // would have lost, also where the measured loss passes the stretch (rho above 1): none's one
  // reduction runs 115-215 with no compute beside it.
  for (CoreSharing sharing : {CoreSharing{1.2, 2}, CoreSharing{1.5, 1}}) {
    o.comm_sharing = every_reduction(sharing);
    sim = run(OverlapStrategy::kNone, o);
    EXPECT_DOUBLE_EQ(sim.loss.step_us, 223) << sharing.lost << " " << sharing.stretch;
    EXPECT_DOUBLE_EQ(sim.loss.exposed_comm_us, 100);
    expect_parts_add_up(sim.loss);
  }
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

TEST_F(Simulate, StaleHidesItsReductionsAndLosesOnlyItsProgressPasses) {
  // Bounded staleness, K = 2 (replay_test's timeline): one rank computes 115 and stashes and
  // updates for 8 (from the third step); 64 ranks add a progress pass after each of the 7
  // forward and backward passes, and each reduction (100) hides behind the next two steps.
  SimulateOptions o;
  o.ranks = 64;
  o.iterations = 6;
  const Simulation sim = simulate(schedule(OverlapStrategy::kNone, true, 2),
                                  schedule(OverlapStrategy::kNone, false, 2), cost, o);
  EXPECT_DOUBLE_EQ(sim.loss.one_rank_us, 123);
  EXPECT_DOUBLE_EQ(sim.mean_step_us, 130);
  EXPECT_DOUBLE_EQ(sim.loss.exposed_comm_us, 0);
  EXPECT_DOUBLE_EQ(sim.loss.rest_us, 7);
  expect_parts_add_up(sim.loss);
  // Reductions of 300 outlast two steps: the lane sets the pace (a reduction a step), and the
  // wait is exposed communication. One rank reduces nothing: its step stays 123.
  const PassCost slow = [](const Step& s) {
    const bool reduction = s.pass == Pass::kSync && sync_pass_of(s) == SyncPass::kAllReduce;
    return reduction ? 300 : cost(s);
  };
  o.warmup = 8;  // the lane's backlog builds over the first steps
  const Simulation bound = simulate(schedule(OverlapStrategy::kNone, true, 2),
                                    schedule(OverlapStrategy::kNone, false, 2), slow, o);
  EXPECT_DOUBLE_EQ(bound.loss.one_rank_us, 123);
  EXPECT_DOUBLE_EQ(bound.mean_step_us, 300);
  EXPECT_DOUBLE_EQ(bound.loss.exposed_comm_us, 300 - 130);
  expect_parts_add_up(bound.loss);
}

TEST_F(Simulate, IndependentRanksLoseOnlyTheirMeeting) {
  // One rank: forward 30, loss 5, backward 80, updates 8 = 123. 64 independent ranks meet after
  // backward, a reduction of their token (3 here), and then update: 126, the meeting exposed.
  const PassCost meeting = [](const Step& s) {
    const bool token = s.pass == Pass::kSync && s.arg == kMeeting;
    return token && sync_pass_of(s) == SyncPass::kAllReduce ? 3 : cost(s);
  };
  SimulateOptions o;
  o.ranks = 64;
  o.iterations = 4;
  const Schedule many = schedule(OverlapStrategy::kNone, true, 0, false, true);
  const Simulation sim =
      simulate(many, schedule(OverlapStrategy::kNone, false, 0, false, true), meeting, o);
  EXPECT_DOUBLE_EQ(sim.loss.one_rank_us, 123);
  EXPECT_DOUBLE_EQ(sim.mean_step_us, 126);
  EXPECT_DOUBLE_EQ(sim.loss.exposed_comm_us, 3);
  expect_parts_add_up(sim.loss);
  // No reduction but the meeting's.
  for (const Step& s : many.steps) {
    if (s.pass == Pass::kSync && sync_pass_of(s) == SyncPass::kAllReduce) {
      EXPECT_EQ(s.arg, kMeeting);
    }
  }
}

// Asynchronous SGD on 2 ranks, worked by hand. An iteration: pull 4, forward 30 with a progress
// pass (1) after each of the 3 passes, loss 5, backward 80 with 4 progress passes, push 4: 130.
// The server applies a push in 5, and a transfer either way takes 3.
//   rank 1, iteration 0: 0-130, pushed at 130. Rank 0's iteration 0: its push's copy 126-130,
//     its own apply 130-135, then rank 1's push: received and applied 135-143, replied at 146.
//   rank 1, iteration 1: its pull waits 130-146, so its push is at 150 + 126 = 276. Rank 0's
//     iteration 1 (143-286): its own push applied at 278, rank 1's at 286, replied at 289.
//   From then on each iteration of rank 0 takes 143, and rank 1's pull waits 13: rank 1 pushes
//     at 419 and 562; rank 0 serves them at its iterations' ends, 429 and 572.
// The server applies at 135, 143, 278, 286, 421, 429, 564 and 572: a step is 2 pushes, and the
// timed steps (warm-up 2) end at 429 and 572, 143 each. The iterations that end in them (286-572):
// rank 1's 2 and 3 (at 419 and 562),
// which wait 13 each, and rank 0's, which wait for nothing: 26 over 4. Busy: rank 0 123 + its
// apply 5, rank 1 123; the one-rank step's 123.
TEST_F(Simulate, AsyncRanksPaceThemselvesAgainstTheParameterServer) {
  SimulateOptions o;
  o.ranks = 2;
  o.iterations = 2;
  o.server.apply_us = 5;
  o.server.transfer_us = [](int64_t) { return 3.0; };
  const Schedule step = schedule(OverlapStrategy::kNone, true, 0, true);
  const Simulation sim = simulate(step, schedule(OverlapStrategy::kNone, false), cost, o);
  EXPECT_EQ(sim.replayed_ranks, 2);
  EXPECT_EQ(sim.step_us, (std::vector<double>{143, 143}));
  EXPECT_DOUBLE_EQ(sim.mean_step_us, 143);
  EXPECT_DOUBLE_EQ(sim.loss.one_rank_us, 123);
  EXPECT_DOUBLE_EQ(sim.loss.exposed_comm_us, 26.0 / 4);
  EXPECT_DOUBLE_EQ(sim.loss.waiting_for_slowest_us, 0);
  EXPECT_DOUBLE_EQ(sim.loss.compute_slowdown_us, (2 * 128 + 2 * 123) / 4.0 - 123);
  expect_parts_add_up(sim.loss);
  // Rank 0's iteration 2: its pull at once, its push (copy, apply, serving) 412-429.
  ASSERT_FALSE(sim.timeline.empty());
  EXPECT_EQ(sim.timeline.front().iteration, 2);
  EXPECT_DOUBLE_EQ(sim.timeline.front().start_us, 286);
  EXPECT_DOUBLE_EQ(sim.timeline.front().end_us, 290);
  const TimedPass& push = sim.timeline[step.steps.size() - 1];
  EXPECT_EQ(sync_pass_of(step.steps[push.index]), SyncPass::kPush);
  EXPECT_DOUBLE_EQ(push.start_us, 412);
  EXPECT_DOUBLE_EQ(push.end_us, 429);
}

TEST_F(Simulate, AsyncRanksWaitForASaturatedServer) {
  // Applying a push takes 100, most of an iteration's 130: however many ranks push, the server
  // applies one each 100 at most, so a rank's step grows with the ranks (at least 100 each), and
  // the growth is their waits for replies. At 16 ranks the others are back in the queue 130 after
  // their reply, long before the 15 pushes ahead of them are served: rank 0 serves 15 at each of
  // its 8 serving points (7 progress passes and its push), 120 pushes and its own in an
  // iteration of 130 + 100 + 12,000: a step (16 pushes) takes 1,600, or 1,830 where it holds
  // rank 0's own 230, once in 121 pushes; within 5% of the server's bound of 1,600.
  const Schedule step = schedule(OverlapStrategy::kNone, true, 0, true);
  const Schedule one = schedule(OverlapStrategy::kNone, false);
  SimulateOptions o;
  o.iterations = 10;
  o.server.apply_us = 100;
  o.server.transfer_us = [](int64_t) { return 0.0; };
  for (int64_t ranks : {4, 16}) {
    o.ranks = ranks;
    const Simulation sim = simulate(step, one, cost, o);
    EXPECT_EQ(sim.replayed_ranks, ranks);
    EXPECT_GE(sim.mean_step_us, 100.0 * static_cast<double>(ranks));
    if (ranks == 16) {
      EXPECT_LE(sim.mean_step_us, 1.05 * 1600);
    }
    EXPECT_GT(sim.loss.exposed_comm_us, 0.5 * (sim.mean_step_us - sim.loss.one_rank_us));
    expect_parts_add_up(sim.loss);
  }
  // One rank has no server to push to; nor has a schedule without a server's costs.
  o.ranks = 1;
  EXPECT_THROW(simulate(step, one, cost, o), InvalidArgument);
  o.ranks = 2;
  o.server.transfer_us = nullptr;
  EXPECT_THROW(simulate(step, one, cost, o), InvalidArgument);
  EXPECT_THROW(replay(step, cost, 1), Unsupported);
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

TEST(NormalJitter, HasMeanOneTheGivenSpreadAndNoOrderSkew) {
  const std::vector<double> f = normal_jitter(0.05);
  ASSERT_EQ(f.size(), 1001u);
  double sum = 0, sq = 0;
  for (double x : f) sum += x, sq += (x - 1) * (x - 1);
  const auto n = static_cast<double>(f.size());
  EXPECT_NEAR(sum / n, 1, 1e-12);  // symmetric quantiles about the median
  // The quantiles' standard deviation falls short of the distribution's by the tails they cut
  // off: at 1001 points, by about 0.3% (the sum of squared quantiles over n, against 1).
  EXPECT_NEAR(std::sqrt(sq / n), 0.05, 0.05 * 0.01);
  EXPECT_TRUE(std::is_sorted(f.begin(), f.end()));
  EXPECT_DOUBLE_EQ(f[500], 1);  // the median
  EXPECT_NEAR(f[1000] - 1, 1 - f[0], 1e-12);
  EXPECT_GT(normal_jitter(kMaxNormalJitterCv, 100000).front(), 0);
  EXPECT_EQ(normal_jitter(0), std::vector<double>(1001, 1.0));
  EXPECT_THROW(normal_jitter(kMaxNormalJitterCv * 1.01), InvalidArgument);
  EXPECT_THROW(normal_jitter(-0.01), InvalidArgument);
}

}  // namespace
}  // namespace dlb
