// The noise verdict (suites/harness/core/noise.h) on hand-made host samples and step times: each
// reason on its own, and the figures behind it; and the host's steadiness (host_steadiness.h).
#include "suites/harness/core/noise.h"

#include <gtest/gtest.h>

#include <cmath>

#include "suites/harness/core/host_steadiness.h"

namespace dlb {
namespace {

// Two samples 10 s apart at 100 ticks a second on 2 hardware threads (2,000 ticks in all), this
// process using `self_s` of CPU, the machine `busy` ticks of it and `steal` stolen.
NoiseInputs quiet(uint64_t busy, double self_s, uint64_t steal = 0) {
  NoiseInputs in;
  in.before = {true, 0.5, 0.4, 1000, 5000, 10, 2.0, 100.0};
  in.after = {true, 1.1, 0.6, 1000 + busy, 7000, 10 + steal, 2.0 + self_s, 110.0};
  in.ticks_per_s = 100;
  in.hardware_threads = 2;
  in.host = {1, 2, 2};  // one rank, on both CPUs
  in.threads_per_rank = 2;
  in.step_seconds = {0.100, 0.101, 0.099, 0.100, 0.102, 0.098, 0.100, 0.101};
  return in;
}

TEST(Noise, AQuietRunIsStable) {
  // 19.8 s of the machine's 20 busy, 19 of them ours: other processes 0.08 cores.
  const auto j = noise_json(quiet(1980, 19.0));
  EXPECT_EQ(j["verdict"], "stable");
  EXPECT_TRUE(j["reasons"].empty());
  EXPECT_NEAR(j["other_processes_cores"].get<double>(), 0.08, 1e-12);
  EXPECT_EQ(j["steal_fraction"], 0.0);
  EXPECT_EQ(j["oversubscribed"], false);
  EXPECT_TRUE(j["outlier_steps"].empty());
  EXPECT_EQ(j["load_before"][0], 0.5);
}

TEST(Noise, AnotherProcessOnTheCoresMakesItNoisy) {
  // The machine busy the whole 20 s, this run 10 s of it: another process used 1 core.
  const auto j = noise_json(quiet(2000, 10.0));
  EXPECT_EQ(j["verdict"], "noisy");
  EXPECT_EQ(j["reasons"][0], "other processes used 1.00 cores during the run");
}

TEST(Noise, StealOutliersSpreadAndOversubscriptionEachSaySo) {
  NoiseInputs in = quiet(1980, 19.8, 100);                          // 100 of 2,000 ticks stolen: 5%
  in.host = {2, 2, 2};                                              // 2 ranks x 2 threads on 2 CPUs
  in.step_seconds = {0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.5};  // one step 5x slower
  const auto j = noise_json(in);
  EXPECT_EQ(j["verdict"], "noisy");
  EXPECT_EQ(j["oversubscribed"], true);
  EXPECT_EQ(j["outlier_steps"], nlohmann::json::array({8}));
  std::vector<std::string> reasons = j["reasons"];
  ASSERT_EQ(reasons.size(), 4u) << j.dump();
  EXPECT_EQ(reasons[0], "2 rank(s) x 2 thread(s) share 2 CPU(s)");
  EXPECT_EQ(reasons[1], "the hypervisor stole 5.0% of the CPU time");
  // CV of eight 0.1 s and one 0.5 s: mean 0.1444, sample sd 0.1333.
  EXPECT_EQ(reasons[2], "step times vary: CV 92.3%");
  EXPECT_EQ(reasons[3], "1 of 9 steps are outliers (Tukey's fences)");
}

TEST(Noise, HostActivityIsTheOtherProcessesAndStealNotThePlacementOrTheSteps) {
  // validate-sim's "inconclusive": the host's doing, not the run's own placement or spread.
  NoiseInputs in = quiet(1980, 19.8);
  in.host.ranks = 2;
  in.step_seconds = {0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.5};
  const auto own = noise_json(in);
  EXPECT_EQ(own["verdict"], "noisy");
  EXPECT_TRUE(host_activity_reasons(own).empty()) << own.dump();
  const auto busy = noise_json(quiet(2000, 10.0, 100));
  EXPECT_EQ(host_activity_reasons(busy),
            (std::vector<std::string>{"other processes used 1.00 cores during the run",
                                      "the hypervisor stole 5.0% of the CPU time"}));
  EXPECT_TRUE(host_activity_reasons(nlohmann::json()).empty());
  EXPECT_TRUE(host_activity_reasons(nlohmann::json{{"other_processes_cores", "x"}}).empty());
}

TEST(Noise, ALoneRunsSpreadIsTheHostsAndASharedRunsIsItsOwn) {
  // validate-sim's baselines run alone: steps that vary there say the host's speed changed.
  NoiseInputs in = quiet(1980, 19.8);
  in.step_seconds = {0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.5};
  const auto alone = noise_json(in);
  EXPECT_EQ(lone_run_reasons(alone),
            (std::vector<std::string>{"step times vary: CV 92.3% in a run alone on the host (its "
                                      "speed changed under the run)"}));
  in.threads_per_rank = 1;
  in.host.ranks = 2;  // 2 ranks x 1 thread on 2 CPUs: the spread is the ranks'
  EXPECT_TRUE(lone_run_reasons(noise_json(in)).empty());
  in.host.ranks = 1;
  in.threads_per_rank = 4;  // oversubscribed by its own threads
  EXPECT_TRUE(lone_run_reasons(noise_json(in)).empty());
  in.threads_per_rank = 1;
  in.step_seconds = {0.1, 0.11, 0.1, 0.09, 0.1, 0.1};  // CV 6.3%: under the threshold
  EXPECT_TRUE(lone_run_reasons(noise_json(in)).empty());
  // A busy host is named as host_activity_reasons names it, the spread after.
  NoiseInputs busy = quiet(2000, 10.0, 100);
  busy.step_seconds = {0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.5};
  const auto reasons = lone_run_reasons(noise_json(busy));
  ASSERT_EQ(reasons.size(), 3u);
  EXPECT_EQ(reasons[0], "other processes used 1.00 cores during the run");
  EXPECT_TRUE(lone_run_reasons(nlohmann::json()).empty());
  EXPECT_TRUE(lone_run_reasons(nlohmann::json{{"step_cv", "x"}}).empty());
  EXPECT_TRUE(lone_run_reasons(nlohmann::json{{"step_cv", 0.5}, {"ranks_on_host", 1.5}}).empty());
}

TEST(Noise, OversubscriptionIsJudgedOnTheCpusTheRanksMayUse) {
  // The machine has 2 hardware threads in every case; what the ranks were given differs.
  NoiseInputs in = quiet(1980, 19.0);
  in.threads_per_rank = 1;
  in.host = {2, 2, 1};  // each rank mapped to a CPU of its own: fits
  EXPECT_EQ(noise_json(in)["oversubscribed"], false);
  in.host = {2, 1, 1};  // taskset -c 0 around mpirun: both ranks on one CPU
  auto j = noise_json(in);
  EXPECT_EQ(j["oversubscribed"], true);
  EXPECT_EQ(j["reasons"][0], "2 rank(s) x 1 thread(s) share 1 CPU(s)");
  EXPECT_EQ(j["usable_cpus"], 1);
  EXPECT_EQ(j["hardware_threads"], 2);
  in.threads_per_rank = 2;
  in.host = {2, 4, 1};  // bound to a CPU each, with a pool of 2: the machine has room, the rank not
  j = noise_json(in);
  EXPECT_EQ(j["oversubscribed"], true);
  EXPECT_EQ(j["reasons"][0], "each rank's 2 thread(s) run on its 1 CPU(s)");
  EXPECT_EQ(j["rank_cpus"], 1);
}

TEST(Noise, AGpuRunIsNotOversubscribedByItsHostThreads) {
  NoiseInputs in = quiet(1980, 19.0);
  in.cpu_device = false;
  in.host = {8, 2, 2};
  EXPECT_EQ(noise_json(in)["oversubscribed"], false);
}

TEST(Noise, AnUnreadableHostLeavesTheStepFigures) {
  NoiseInputs in = quiet(1980, 19.0);
  in.before.ok = false;
  const auto j = noise_json(in);
  EXPECT_EQ(j["host"], "not readable (/proc)");
  EXPECT_FALSE(j.contains("other_processes_cores"));
  EXPECT_EQ(j["verdict"], "stable");
}

// The host's steadiness (host_steadiness.h) from hand-made pass times: three passes of 100 MB,
// two of 10 ms and one of 20 ms.
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
  const auto j = steadiness_json(s, "after the runs");
  EXPECT_EQ(j["when"], "after the runs");
  EXPECT_EQ(j["passes"], 3);
  EXPECT_EQ(j["min_bytes_per_s"], 5e9);
}

TEST(HostSteadiness, OnlyPassesVaryingOverTheStepThresholdGiveAReason) {
  // Two values: sd = |a - b| / sqrt(2). 9 and 11 ms: CV 14.1%, over 10%; 9.5 and 10.5: 7.1%.
  const Steadiness over = steadiness_of({0.009, 0.011}, 1e6);
  EXPECT_NEAR(over.cv, 0.1 * std::sqrt(2.0), 1e-12);
  EXPECT_TRUE(steadiness_reason(over, "x").has_value());
  const Steadiness under = steadiness_of({0.0095, 0.0105}, 1e6);
  EXPECT_NEAR(under.cv, 0.05 * std::sqrt(2.0), 1e-12);
  EXPECT_FALSE(steadiness_reason(under, "x").has_value());
  const Steadiness none = steadiness_of({}, 1e6);
  EXPECT_EQ(none.passes, 0);
  EXPECT_EQ(none.median_bytes_per_s, 0);
  EXPECT_FALSE(steadiness_reason(none, "x").has_value());
}

TEST(HostSteadiness, AMeasurementTimesAtLeastItsFewestPasses) {
  const Steadiness s = measure_steadiness(0.0);
  EXPECT_GE(s.passes, kSteadinessPasses);
  EXPECT_EQ(s.bytes_per_pass, 3.0 * 4 * (16 << 20));
  EXPECT_GT(s.min_bytes_per_s, 0);
  EXPECT_LE(s.min_bytes_per_s, s.median_bytes_per_s);
  EXPECT_LE(s.median_bytes_per_s, s.max_bytes_per_s);
  EXPECT_GE(s.cv, 0);
}

}  // namespace
}  // namespace dlb
