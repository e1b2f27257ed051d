// Whether a point's timed steps ran on a quiet machine, pyperf-style: what the host was doing
// around the run (load averages, CPU time used by other processes and stolen by a hypervisor,
// the frequency governor), how the run sat on it (ranks on the host, the CPUs they were given,
// threads per rank, oversubscription), and the step times' own spread (coefficient of variation,
// Tukey's outliers). The record's `noise` object carries every figure and a verdict, `stable` or
// `noisy`, with its reasons; docs/metrics.md gives the thresholds. noise_json is pure: tests give
// it hand-made samples.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "suites/harness/core/host_share.h"

namespace dlb {

// A timed phase's steps varying by more than this coefficient of variation make it noisy
// (docs/metrics.md).
inline constexpr double kNoisyStepCv = 0.10;

// One reading of the host (Linux's /proc; `ok` false where it could not be read).
struct HostSample {
  bool ok = false;
  double load1 = 0, load5 = 0;   // /proc/loadavg
  uint64_t busy = 0, total = 0;  // /proc/stat's cpu line, in clock ticks: all but idle,
  uint64_t steal = 0;            // iowait and steal; everything; stolen by the hypervisor
  double self_cpu_s = 0;         // this process's user + system CPU time (all threads)
  double wall_s = 0;             // a steady clock
};
HostSample sample_host();
// /sys's scaling governor of cpu0, or "" where there is none (a VM, a container).
std::string cpu_governor();

struct NoiseInputs {
  HostSample before, after;
  double ticks_per_s = 100;      // sysconf(_SC_CLK_TCK)
  int64_t hardware_threads = 1;  // of this host
  HostShare host;                // this run's ranks on the host and the CPUs they may use
  int64_t threads_per_rank = 1;  // each rank's compute threads (its OpenMP pool)
  bool cpu_device = true;        // the ranks compute on the CPU (else on their GPUs)
  std::string governor;
  std::vector<double> step_seconds;  // the timed steps
};

// The record's `noise`: the figures, `verdict` and `reasons` (empty when stable).
nlohmann::json noise_json(const NoiseInputs& in);

// What else on the host disturbed a run, from its record's `noise` (noise_json's): other
// processes' CPU time and the hypervisor's steal beyond their thresholds, each as a reason. Not
// the run's own placement (ranks sharing cores) or its steps' spread: a measurement that models
// those (validate-sim) still judges such a run, but not one the host disturbed.
std::vector<std::string> host_activity_reasons(const nlohmann::json& noise);

// What a run alone on the host says of the host, from its record's `noise`: host_activity_reasons,
// and its steps' spread beyond the noise verdict's threshold (`step_cv` over 10%). A lone run (its
// record says one rank on the host, not oversubscribed) whose steps are alike by construction
// (synthetic data, no communication, as validate-sim's one-rank runs) is taken to have nothing of
// its own that varies them that much: such a spread is taken as the host's speed changing under it
// (a neighbour on the same memory or caches, a hypervisor), which neither steal nor other
// processes' time need show. The CV is over every timed step, so one step in 60 twice as slow as
// the rest is enough (12.7%). For a run that shares cores, host_activity_reasons alone: its steps'
// spread is its own.
std::vector<std::string> lone_run_reasons(const nlohmann::json& noise);

}  // namespace dlb
