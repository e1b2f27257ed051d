#include "suites/harness/core/noise.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include "runtime/core/stats.h"
#include "suites/harness/core/timed_phase.h"

namespace dlb {

HostSample sample_host() {
  HostSample s;
  s.wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  rusage self{};
  if (getrusage(RUSAGE_SELF, &self) == 0) {
    s.self_cpu_s = static_cast<double>(self.ru_utime.tv_sec + self.ru_stime.tv_sec) +
                   static_cast<double>(self.ru_utime.tv_usec + self.ru_stime.tv_usec) * 1e-6;
  }
  std::ifstream load("/proc/loadavg");
  std::ifstream stat("/proc/stat");
  std::string cpu;
  // user nice system idle iowait irq softirq steal (guest time is inside user already)
  uint64_t f[8] = {};
  if (!(load >> s.load1 >> s.load5) || !(stat >> cpu) || cpu != "cpu") return s;
  for (uint64_t& v : f) stat >> v;
  if (!stat) return s;
  s.total = f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
  s.busy = s.total - f[3] - f[4] - f[7];  // stolen time is no process's
  s.steal = f[7];
  s.ok = true;
  return s;
}

std::string cpu_governor() {
  std::ifstream in("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
  std::string g;
  return in >> g ? g : "";
}

namespace {

// Thresholds (docs/metrics.md): what pyperf and google/benchmark warn about, scaled to a run.
// The steps' CV: kNoisyStepCv (noise.h), shared with host_steadiness.h.
constexpr double kOtherCores = 0.25, kStealFraction = 0.02, kOutliers = 0.10;
using Reasons = std::vector<std::string>;

// How the run sat on the host: its ranks' threads against the CPUs they were given.
void placement(const NoiseInputs& in, nlohmann::json& j, Reasons& reasons) {
  j["hardware_threads"] = in.hardware_threads;
  j["ranks_on_host"] = in.host.ranks;
  j["usable_cpus"] = in.host.cpus;
  j["rank_cpus"] = in.host.own_cpus;
  j["threads_per_rank"] = in.threads_per_rank;
  const bool oversubscribed = in.cpu_device && in.host.oversubscribed(in.threads_per_rank);
  j["oversubscribed"] = oversubscribed;
  if (oversubscribed) {
    reasons.push_back(in.threads_per_rank > in.host.own_cpus
                          ? fmt::format("each rank's {} thread(s) run on its {} CPU(s)",
                                        in.threads_per_rank, in.host.own_cpus)
                          : fmt::format("{} rank(s) x {} thread(s) share {} CPU(s)", in.host.ranks,
                                        in.threads_per_rank, in.host.cpus));
  }
  if (!in.governor.empty()) j["governor"] = in.governor;
}

// What else the host did around the run: load, other processes' CPU time, steal.
void host_activity(const NoiseInputs& in, nlohmann::json& j, Reasons& reasons) {
  if (!in.before.ok || !in.after.ok || in.after.total <= in.before.total) {
    j["host"] = "not readable (/proc)";
    return;
  }
  const double wall = in.after.wall_s - in.before.wall_s;
  const double busy_s = static_cast<double>(in.after.busy - in.before.busy) / in.ticks_per_s;
  // This run's ranks are alike: each used about what this one did.
  const double ours_s =
      (in.after.self_cpu_s - in.before.self_cpu_s) * static_cast<double>(in.host.ranks);
  const double other_cores = wall > 0 ? std::max(0.0, busy_s - ours_s) / wall : 0.0;
  const double steal = static_cast<double>(in.after.steal - in.before.steal) /
                       static_cast<double>(in.after.total - in.before.total);
  j["load_before"] = {in.before.load1, in.before.load5};
  j["load_after"] = {in.after.load1, in.after.load5};
  j["other_processes_cores"] = other_cores;
  j["steal_fraction"] = steal;
  if (other_cores > kOtherCores) {
    reasons.push_back(fmt::format("other processes used {:.2f} cores during the run", other_cores));
  }
  if (steal > kStealFraction) {
    reasons.push_back(fmt::format("the hypervisor stole {:.1f}% of the CPU time", 100 * steal));
  }
}

// The timed steps' own spread: CV and outliers.
void step_spread(const std::vector<double>& t, nlohmann::json& j, Reasons& reasons) {
  if (t.size() < 2) return;
  const Spread s = spread(t);
  const StepFences f = step_fences(t);
  std::vector<int64_t> outliers;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] < f.low || t[i] > f.high) outliers.push_back(static_cast<int64_t>(i));
  }
  j["step_cv"] = s.cv;
  j["outlier_steps"] = outliers;  // indices into metrics.step_time_s.all
  if (s.cv > kNoisyStepCv)
    reasons.push_back(fmt::format("step times vary: CV {:.1f}%", 100 * s.cv));
  if (static_cast<double>(outliers.size()) > kOutliers * static_cast<double>(t.size())) {
    reasons.push_back(
        fmt::format("{} of {} steps are outliers (Tukey's fences)", outliers.size(), t.size()));
  }
}

// A field of a record's `noise`, or `otherwise` where it is absent or not of the type asked.
double noise_number(const nlohmann::json& noise, const char* key, double otherwise = 0) {
  const auto it = noise.find(key);
  return it != noise.end() && it->is_number() ? it->get<double>() : otherwise;
}

}  // namespace

std::vector<std::string> host_activity_reasons(const nlohmann::json& noise) {
  std::vector<std::string> reasons;
  if (!noise.is_object()) return reasons;
  if (noise_number(noise, "other_processes_cores") > kOtherCores) {
    reasons.push_back(fmt::format("other processes used {:.2f} cores during the run",
                                  noise_number(noise, "other_processes_cores")));
  }
  if (noise_number(noise, "steal_fraction") > kStealFraction) {
    reasons.push_back(fmt::format("the hypervisor stole {:.1f}% of the CPU time",
                                  100 * noise_number(noise, "steal_fraction")));
  }
  return reasons;
}

std::vector<std::string> lone_run_reasons(const nlohmann::json& noise) {
  std::vector<std::string> reasons = host_activity_reasons(noise);
  if (!noise.is_object()) return reasons;
  const auto oversubscribed = noise.find("oversubscribed");
  // A record that does not say it ran alone is not taken to have.
  const bool shares = noise_number(noise, "ranks_on_host", 0) != 1 ||
                      (oversubscribed != noise.end() && oversubscribed->is_boolean() &&
                       oversubscribed->get<bool>());
  const double cv = noise_number(noise, "step_cv");
  if (!shares && cv > kNoisyStepCv) {
    reasons.push_back(
        fmt::format("step times vary: CV {:.1f}% in a run alone on the host (its speed changed "
                    "under the run)",
                    100 * cv));
  }
  return reasons;
}

nlohmann::json noise_json(const NoiseInputs& in) {
  nlohmann::json j;
  Reasons reasons;
  placement(in, j, reasons);
  host_activity(in, j, reasons);
  step_spread(in.step_seconds, j, reasons);
  j["verdict"] = reasons.empty() ? "stable" : "noisy";
  j["reasons"] = reasons;
  return j;
}

}  // namespace dlb
