// How long the timed phase runs and which of its steps count (suites/harness/core/timed_phase.h).
#include "suites/harness/core/timed_phase.h"

#include <gtest/gtest.h>

namespace dlb {
namespace {

TEST(TimedPhase, MinTimeAsksForMoreStepsAtTheMeasuredPace) {
  EXPECT_EQ(extra_steps(20, 1.0, 0.0), 0);               // no min_time
  EXPECT_EQ(extra_steps(20, 1.0, 1.0), 0);               // already long enough
  EXPECT_EQ(extra_steps(20, 1.0, 3.0), 40);              // 20 steps in 1 s: 60 for 3 s
  EXPECT_EQ(extra_steps(20, 1.0, 2.01), 21);             // ceil(40.2) = 41 steps in all
  EXPECT_EQ(extra_steps(20, 0.0, 3.0), 0);               // nothing timed: no pace to go by
  EXPECT_EQ(extra_steps(1, 1e-9, 1e9), 2147483647 - 1);  // capped at 2^31 - 1 steps
}

TEST(TimedPhase, LeadingStepsAboveTheLaterStepsFenceAreDiscarded) {
  // The later half: 0.10 and 0.11 (Q1 0.10, Q3 0.11, fence 0.125).
  EXPECT_EQ(unsettled_steps({0.30, 0.20, 0.104, 0.25, 0.10, 0.11, 0.10, 0.11}), 2);
  EXPECT_EQ(unsettled_steps({0.10, 0.11, 0.10, 0.11, 0.10, 0.11}), 0);  // settled from the start
  EXPECT_EQ(unsettled_steps({0.9, 0.9, 0.9, 0.9, 0.1, 0.1, 0.1, 0.1}), 4);  // at most half
  EXPECT_EQ(unsettled_steps({0.9, 0.1, 0.1}), 0);                           // too few to judge
  // Never into the traced steps: with 8 steps and 6 traced, at most the first 2.
  EXPECT_EQ(unsettled_steps({0.9, 0.9, 0.9, 0.9, 0.1, 0.1, 0.1, 0.1}, 8 - 6), 2);
  EXPECT_EQ(unsettled_steps({0.9, 0.9, 0.9, 0.9, 0.1, 0.1, 0.1, 0.1}, 0), 0);
}

// Steps a GPU times alike: the IQR is 0, and a step 0.1% slower is no outlier; 6% slower is.
TEST(TimedPhase, FencesStayAtLeastFivePercentFromTheMedian) {
  const StepFences f = step_fences({0.1, 0.1, 0.1, 0.1, 0.1001, 0.1});
  EXPECT_DOUBLE_EQ(f.high, 1.05 * 0.1);
  EXPECT_DOUBLE_EQ(f.low, 0.95 * 0.1);
  EXPECT_EQ(unsettled_steps({0.1001, 0.1, 0.1, 0.1, 0.1, 0.1}), 0);
  EXPECT_EQ(unsettled_steps({0.106, 0.1, 0.1, 0.1, 0.1, 0.1}), 1);
}

TEST(TimedPhase, RepetitionsAggregate) {
  const auto j = repetition_json({90, 100, 110});
  EXPECT_EQ(j["count"], 3);
  EXPECT_EQ(j["median"], 100.0);
  EXPECT_EQ(j["mean"], 100.0);
  EXPECT_DOUBLE_EQ(j["stddev"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(j["cv"].get<double>(), 0.1);
}

}  // namespace
}  // namespace dlb
