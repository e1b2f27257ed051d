// A schedule replayed on a virtual clock with given pass costs (runtime/train/replay.h): the
// timeline is exact, so where each strategy puts communication can be read off it. The schedule
// is the one a two-rank trainer runs, for fc1 -> relu -> fc2, with fc2's parameters in bucket 0
// (reduced first) and fc1's in bucket 1.
#include "runtime/train/replay.h"

#include <gtest/gtest.h>

#include "tests/unit/fc_step.h"

namespace dlb {
namespace {

class Replay : public ::testing::Test, protected FcStep {
 protected:
  // "F fc1 0-10", "AR 0 75-125", "U 1 175-179": a pass as the expectations name it.
  std::vector<std::string> timeline(OverlapStrategy strategy, int64_t iterations,
                                    int64_t staleness = 0, const PassCost& costs = cost) {
    const Schedule s = schedule(strategy, true, staleness);
    std::vector<std::string> out;
    for (const TimedPass& t : replay(s, costs, iterations)) {
      const Step& st = s.steps[t.index];
      std::string what;
      switch (st.pass) {
        case Pass::kForward:
          what = "F " + g.nodes()[st.node].name;
          break;
        case Pass::kLoss:
          what = "loss";
          break;
        case Pass::kBackwardData:
          what = "BD " + g.nodes()[st.node].name;
          break;
        case Pass::kBackwardWeights:
          what = "BW " + g.nodes()[st.node].name;
          break;
        case Pass::kSync: {
          const char* kinds[] = {"AR", "W", "U", "UC", "P", "S", "US"};
          what = kinds[st.op];
          if (st.op < static_cast<int>(SyncPass::kProgress)) what += " " + std::to_string(st.arg);
          break;
        }
        default:
          what = step_name(st);
      }
      out.push_back(what + " " + std::to_string(static_cast<int>(t.start_us)) + "-" +
                    std::to_string(static_cast<int>(t.end_us)) +
                    (t.lane == Lane::kComm ? " comm" : ""));
    }
    return out;
  }
};

using Lines = std::vector<std::string>;

TEST_F(Replay, NoneReducesOnceAfterBackwardWithNothingToHideItBehind) {
  EXPECT_EQ(timeline(OverlapStrategy::kNone, 1),
            (Lines{"F fc1 0-10", "F relu 10-20", "F fc2 20-30", "loss 30-35", "BD fc2 35-55",
                   "BW fc2 55-75", "BD relu 75-95", "BW fc1 95-115", "AR -1 115-215 comm",
                   "W -1 115-215", "U 0 215-219", "U 1 219-223"}));
}

TEST_F(Replay, BackwardHidesTheFirstBucketsReductionBehindTheRestOfBackward) {
  // Bucket 0 is reduced while relu's and fc1's backward passes run; bucket 1 waits for it on
  // the comm lane, and its update for bucket 1's reduction.
  EXPECT_EQ(timeline(OverlapStrategy::kBackward, 1),
            (Lines{"F fc1 0-10", "F relu 10-20", "F fc2 20-30", "loss 30-35", "BD fc2 35-55",
                   "BW fc2 55-75", "AR 0 75-125 comm", "BD relu 75-95", "P 95-96", "BW fc1 96-116",
                   "P 116-117", "AR 1 125-175 comm", "W 0 117-125", "U 0 125-129", "W 1 129-175",
                   "U 1 175-179"}));
}

TEST_F(Replay, ForwardAppliesEveryBucketBeforeTheNextForwardFillingTheLastWait) {
  // The first iteration has nothing to apply. In the second, bucket 0's reduction ended at 125:
  // its update runs while bucket 1's is still in flight (to 175), and the forward starts after
  // bucket 1's update.
  EXPECT_EQ(timeline(OverlapStrategy::kForward, 2),
            (Lines{"W 0 0-0", "W 1 0-0", "F fc1 0-10", "F relu 10-20", "F fc2 20-30", "loss 30-35",
                   "BD fc2 35-55", "BW fc2 55-75", "AR 0 75-125 comm", "BD relu 75-95", "P 95-96",
                   "BW fc1 96-116", "P 116-117", "AR 1 125-175 comm",
                   // the second iteration
                   "W 0 117-125", "UC 0 125-129", "W 1 129-175", "UC 1 175-179", "F fc1 179-189",
                   "F relu 189-199", "F fc2 199-209", "loss 209-214", "BD fc2 214-234",
                   "BW fc2 234-254", "AR 0 254-304 comm", "BD relu 254-274", "P 274-275",
                   "BW fc1 275-295", "P 295-296", "AR 1 304-354 comm"}));
}

// Bounded staleness, K = 2 (sync_schedule.h): step i's slot is i mod 2. Each step computes for
// 122 (forward, the loss and backward, each forward and backward pass followed by a progress
// pass of 1), then waits for its slot, updates from it (not in the first 2 steps: nothing was
// stashed there), stashes (4) and launches the slot's reduction (100), which has the next two
// steps to hide behind. The sync passes of three steps:
TEST_F(Replay, StaleHidesEachReductionBehindTheNextStepsAndUpdatesFromTheOneKStepsBefore) {
  Lines sync;
  for (const std::string& line : timeline(OverlapStrategy::kNone, 3, 2)) {
    if (line[0] == 'W' || line[0] == 'S' || line[0] == 'U' || line[0] == 'A') sync.push_back(line);
  }
  EXPECT_EQ(sync, (Lines{// step 0, slot 0: nothing to wait for or apply
                         "W -2 122-122", "S 122-126", "AR -2 126-226 comm",
                         // step 1, slot 1
                         "W -2 248-248", "S 248-252", "AR -2 252-352 comm",
                         // step 2, slot 0: its reduction ended at 226, its update is step 0's
                         "W -2 374-374", "US 374-378", "S 378-382", "AR -2 382-482 comm"}));
}

TEST_F(Replay, StaleWaitsWhereAReductionOutlastsKSteps) {
  // A reduction of 300: slot 0's, launched at 126, ends at 426; step 2 reaches its wait at 374
  // and waits 52. Slot 1's starts when the lane is free (426), and slot 0's next at 726.
  const PassCost slow = [](const Step& s) {
    const bool reduction = s.pass == Pass::kSync && sync_pass_of(s) == SyncPass::kAllReduce;
    return reduction ? 300 : cost(s);
  };
  Lines sync;
  for (const std::string& line : timeline(OverlapStrategy::kNone, 3, 2, slow)) {
    if (line[0] == 'W' || line[0] == 'S' || line[0] == 'U' || line[0] == 'A') sync.push_back(line);
  }
  EXPECT_EQ(sync, (Lines{"W -2 122-122", "S 122-126", "AR -2 126-426 comm", "W -2 248-248",
                         "S 248-252", "AR -2 426-726 comm", "W -2 374-426", "US 426-430",
                         "S 430-434", "AR -2 726-1026 comm"}));
}

// A wait ends with the reductions the program's edges name (runtime/nn/lane_order.h), not by a
// rule of the replay's own: the stale:2 wait of step 1, its carried edge turned to name the step
// before's reduction (slot 0's, 126 to 426 at a cost of 300) instead of the one two back (none),
// waits for it.
TEST_F(Replay, AWaitEndsWithTheReductionsItsEdgesName) {
  const PassCost slow = [](const Step& s) {
    const bool reduction = s.pass == Pass::kSync && sync_pass_of(s) == SyncPass::kAllReduce;
    return reduction ? 300 : cost(s);
  };
  auto waits = [&](const Schedule& s) {
    Lines out;
    for (const TimedPass& t : replay(s, slow, 2)) {
      const Step& st = s.steps[t.index];
      if (st.pass == Pass::kSync && sync_pass_of(st) == SyncPass::kWait) {
        out.push_back(std::to_string(static_cast<int>(t.start_us)) + "-" +
                      std::to_string(static_cast<int>(t.end_us)));
      }
    }
    return out;
  };
  Schedule s = schedule(OverlapStrategy::kNone, true, 2);
  EXPECT_EQ(waits(s), (Lines{"122-122", "248-248"}));
  for (Step& st : s.steps) {
    if (st.pass != Pass::kSync || sync_pass_of(st) != SyncPass::kWait) continue;
    ASSERT_EQ(st.carried.size(), 1u);
    EXPECT_EQ(st.carried[0].distance, 2);
    st.carried[0].distance = 1;
  }
  EXPECT_EQ(waits(s), (Lines{"122-122", "248-426"}));
  // A wait that follows no reduction (its edges never linked) is refused, not ended at once.
  for (Step& st : s.steps) st.carried.clear();
  EXPECT_THROW(replay(s, slow, 1), std::logic_error);
}

}  // namespace
}  // namespace dlb
