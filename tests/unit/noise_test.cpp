// The noise verdict (suites/harness/core/noise.h) on hand-made host samples and step times: each
// reason on its own, and the figures behind it.
#include "suites/harness/core/noise.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace dlb
