// The measured scaling-loss breakdown (suites/harness/core/measured_loss.h) on traces made by hand,
// worked out in the comments: the parts add up, and a rank that launched early waits for the last.
#include "suites/harness/core/measured_loss.h"

#include <gtest/gtest.h>

#include "runtime/core/error.h"

namespace dlb {
namespace {

nlohmann::json span(const char* cat, int tid, double ts, double dur, int64_t step = 0) {
  nlohmann::json args = {{"step", step}};
  if (std::string(cat) == "allreduce") args["bucket"] = "all";
  return {{"ph", "X"}, {"cat", cat}, {"name", cat}, {"tid", tid},
          {"ts", ts},  {"dur", dur}, {"args", args}};
}

nlohmann::json trace(std::vector<nlohmann::json> events, double origin = 1e6) {
  return {{"traceEvents", events}, {"otherData", {{"origin_unix_us", origin}}}};
}

TEST(MeasuredScalingLoss, SplitsTheStepBeyondOneRanksIntoItsCauses) {
  // One rank: a 100 us step, 80 of it computing.
  const auto base = trace({span("step", 3, 0, 100), span("forward", 0, 0, 80)});
  // Rank 0 computes 0-80 and 120-140 (100 us), and launches the all-reduce at 80; it runs to
  // 130, under compute for 10 us: 40 us of it exposed. Rank 1 computes 0-100 and 130-145 (115 us)
  // and launches at 100, running to 130: 30 us exposed. Rank 0 launched 20 us before the last.
  const auto r0 = trace({span("step", 3, 0, 150), span("forward", 0, 0, 80),
                         span("optimizer", 0, 120, 20), span("allreduce", 1, 80, 50)});
  const auto r1 = trace({span("step", 3, 0, 150), span("forward", 0, 0, 100),
                         span("optimizer", 0, 130, 15), span("allreduce", 1, 100, 30)});
  const nlohmann::json l = measured_scaling_loss({r0, r1}, base, "test");
  // Means over the ranks: busy 107.5, idle 42.5, exposed 35, of which 10 (rank 0's 20) is
  // waiting for the slowest rank.
  EXPECT_DOUBLE_EQ(l["one_rank_step_s"].get<double>(), 100e-6);
  EXPECT_DOUBLE_EQ(l["step_s"].get<double>(), 150e-6);
  EXPECT_DOUBLE_EQ(l["waiting_for_slowest_s"].get<double>(), 10e-6);
  EXPECT_DOUBLE_EQ(l["exposed_comm_s"].get<double>(), 25e-6);
  EXPECT_DOUBLE_EQ(l["compute_slowdown_s"].get<double>(), 27.5e-6);
  // Idle outside the all-reduces: 7.5 us on average, against the one rank's 20.
  EXPECT_DOUBLE_EQ(l["rest_s"].get<double>(), -12.5e-6);
}

TEST(MeasuredScalingLoss, RanksClocksAreAlignedByTheirOrigins) {
  // The same launches as above, but rank 1's trace starts 20 us later on the host's clock: its
  // launch at 80 of its own is at 100 of rank 0's, and rank 0 waits for it as before.
  const auto base = trace({span("step", 3, 0, 100), span("forward", 0, 0, 80)});
  const auto r0 =
      trace({span("step", 3, 0, 150), span("forward", 0, 0, 80), span("allreduce", 1, 80, 50)});
  const auto r1 = trace(
      {span("step", 3, 0, 150), span("forward", 0, 0, 80), span("allreduce", 1, 80, 50)}, 1e6 + 20);
  const nlohmann::json l = measured_scaling_loss({r0, r1}, base, "test");
  EXPECT_DOUBLE_EQ(l["waiting_for_slowest_s"].get<double>(), 10e-6);
}

TEST(MeasuredScalingLoss, RefusesTracesOfDifferentSteps) {
  const auto base = trace({span("step", 3, 0, 100)});
  const auto r0 = trace({span("step", 3, 0, 100, 4)});
  const auto r1 = trace({span("step", 3, 0, 100, 5)});
  EXPECT_THROW(measured_scaling_loss({r0, r1}, base, "test"), InvalidArgument);
  EXPECT_THROW(measured_scaling_loss({r0, trace({})}, base, "test"), InvalidArgument);
}

}  // namespace
}  // namespace dlb
