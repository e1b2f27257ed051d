// Whether this host holds its speed, measured with nothing of dlbench in it: one thread times a
// fixed STREAM-style add (c = a + b over three arrays of 64 MiB, 192 MiB in all, more than most
// CPUs' last-level cache; four adds a pass, about as long as a small model's step), pass after
// pass, for about a second and a half. A neighbour on the same memory or caches, or a hypervisor,
// changes it where neither steal nor other processes' CPU time need show (noise.h's
// host_activity_reasons). validate-sim measures it before and after its runs: a measurement,
// beside what lone_run_reasons takes a run alone's varying steps to be.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace dlb {

struct Steadiness {
  int64_t passes = 0;
  double bytes_per_pass = 0;  // two reads and one write an element an add, as STREAM counts them
  double median_bytes_per_s = 0, min_bytes_per_s = 0, max_bytes_per_s = 0;
  double cv = 0;  // of the passes' times (0 with fewer than two)
};

// The passes' figures, from their times (pure: tests give it hand-made ones). InvalidArgument for
// a time that is not positive: no pass of real work takes none.
Steadiness steadiness_of(const std::vector<double>& pass_seconds, double bytes_per_pass);

// The fewest passes a measurement times, however long they take.
constexpr int64_t kSteadinessPasses = 30;

// Times passes for `seconds`, at least kSteadinessPasses of them, after one untimed (a warm-up).
// About `seconds` on a host that streams 10 GB/s or more.
Steadiness measure_steadiness(double seconds = 1.5);

// "25.9 GB/s (median of 44 passes; 20.7 to 26.8, CV 6.3%)".
std::string steadiness_summary(const Steadiness& s);

// {when, passes, bytes_per_pass, median_bytes_per_s, min_bytes_per_s, max_bytes_per_s, cv}.
nlohmann::json steadiness_json(const Steadiness& s, const std::string& when);

// Why the host did not hold its speed `when`: the passes' CV over the noise verdict's step
// threshold (kNoisyStepCv). Or nothing.
std::optional<std::string> steadiness_reason(const Steadiness& s, const std::string& when);

// Why the host's speed changed between two measurements: their medians more than kNoisyStepCv
// apart (relative to the first). Or nothing.
std::optional<std::string> steadiness_change_reason(const Steadiness& before,
                                                    const Steadiness& after);

}  // namespace dlb
