// The host's steadiness (suites/harness/core/host_steadiness.h): its figures and reasons from
// hand-made pass times, and the shape of a real measurement.
#include "suites/harness/core/host_steadiness.h"

#include <gtest/gtest.h>

#include <cmath>

#include "runtime/core/error.h"

namespace dlb {
namespace {

// Three passes of 100 MB: two of 10 ms and one of 20 ms.
TEST(HostSteadiness, ThePassesGiveTheBandwidthsAndTheirSpread) {
  const Steadiness s = steadiness_of({0.010, 0.020, 0.010}, 1e8);
  EXPECT_EQ(s.passes, 3);
  EXPECT_DOUBLE_EQ(s.median_bytes_per_s, 1e10);
  EXPECT_DOUBLE_EQ(s.min_bytes_per_s, 5e9);
  EXPECT_DOUBLE_EQ(s.max_bytes_per_s, 1e10);
  // mean 40/3 ms; sample sd sqrt((2 x (10/3)^2 + (20/3)^2) / 2) = sqrt(100/3) ms.
  EXPECT_NEAR(s.cv, std::sqrt(100.0 / 3.0) / (40.0 / 3.0), 1e-12);
  EXPECT_EQ(*steadiness_reason(s, "before the runs"),
            "host before the runs: a fixed memory stream (one thread, nothing of dlbench) moved "
            "5.0 to 10.0 GB/s, its passes' times varying by CV 43.3% (the host's speed changed)");
  EXPECT_EQ(steadiness_summary(s), "10.0 GB/s (median of 3 passes; 5.0 to 10.0, CV 43.3%)");
  const auto j = steadiness_json(s, "after the runs");
  EXPECT_EQ(j["when"], "after the runs");
  EXPECT_EQ(j["passes"], 3);
  EXPECT_EQ(j["min_bytes_per_s"], 5e9);
}

// Two passes 1 - d and 1 + d: sd = d sqrt(2), mean 1, so CV = d sqrt(2).
Steadiness two_passes_at_cv(double cv) {
  const double d = cv / std::sqrt(2.0);
  return steadiness_of({1 - d, 1 + d}, 1e9);
}

TEST(HostSteadiness, OnlyPassesVaryingOverTheStepThresholdGiveAReason) {
  const Steadiness under = two_passes_at_cv(0.099), over = two_passes_at_cv(0.101);
  EXPECT_NEAR(under.cv, 0.099, 1e-12);
  EXPECT_NEAR(over.cv, 0.101, 1e-12);
  EXPECT_FALSE(steadiness_reason(under, "x").has_value());
  EXPECT_TRUE(steadiness_reason(over, "x").has_value());
  const Steadiness none = steadiness_of({}, 1e6);
  EXPECT_EQ(none.passes, 0);
  EXPECT_EQ(none.median_bytes_per_s, 0);
  EXPECT_FALSE(steadiness_reason(none, "x").has_value());
}

TEST(HostSteadiness, AChangeOfMedianOverTheThresholdBetweenTwoMeasurementsIsAReason) {
  const Steadiness before = steadiness_of({0.010}, 1e8);  // 10 GB/s
  EXPECT_FALSE(steadiness_change_reason(before, steadiness_of({0.0109}, 1e8)).has_value());
  EXPECT_FALSE(steadiness_change_reason(before, steadiness_of({0.0092}, 1e8)).has_value());
  EXPECT_EQ(*steadiness_change_reason(before, steadiness_of({0.0125}, 1e8)),
            "host: a fixed memory stream (one thread, nothing of dlbench) moved 10.0 GB/s before "
            "the runs and 8.0 after them (-20.0%: the host's speed changed between them)");
  EXPECT_TRUE(steadiness_change_reason(before, steadiness_of({0.0090}, 1e8)).has_value());
  EXPECT_FALSE(steadiness_change_reason(steadiness_of({}, 1e8), before).has_value());
}

TEST(HostSteadiness, APassOfNoTimeIsRefused) {
  EXPECT_THROW(steadiness_of({0.01, 0.0}, 1e8), InvalidArgument);
  EXPECT_THROW(steadiness_of({-1.0}, 1e8), InvalidArgument);
}

TEST(HostSteadiness, AMeasurementTimesRealPasses) {
  const Steadiness s = measure_steadiness(0.0);
  EXPECT_GE(s.passes, kSteadinessPasses);
  EXPECT_EQ(s.bytes_per_pass, 4 * 3.0 * 4 * (16 << 20));  // 4 adds of 3 x 64 MiB
  EXPECT_GT(s.min_bytes_per_s, 0);
  EXPECT_LE(s.min_bytes_per_s, s.median_bytes_per_s);
  EXPECT_LE(s.median_bytes_per_s, s.max_bytes_per_s);
  // One thread reaches no terabyte a second: a pass the compiler left out would.
  EXPECT_LT(s.max_bytes_per_s, 1e12);
  EXPECT_TRUE(std::isfinite(s.cv));
}

}  // namespace
}  // namespace dlb
