// Whether this host holds its speed, measured with nothing of dlbench in it: one thread times a
// fixed STREAM-style add (c = a + b over three arrays of 64 MiB, far larger than the caches),
// pass after pass, for about a second, and the passes' spread is the host's. A neighbour on the
// same memory or caches, or a hypervisor, changes it where neither steal nor other processes' CPU
// time need show (noise.h's host_activity_reasons). validate-sim measures it before and after its
// runs: the figure behind what it takes a run alone's varying steps to be (lone_run_reasons).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace dlb {

struct Steadiness {
  int64_t passes = 0;
  double bytes_per_pass = 0;  // two reads and one write an element, as STREAM counts them
  double median_bytes_per_s = 0, min_bytes_per_s = 0, max_bytes_per_s = 0;
  double cv = 0;  // of the passes' times (0 with fewer than two)
};

// The passes' figures, from their times (pure: tests give it hand-made ones).
Steadiness steadiness_of(const std::vector<double>& pass_seconds, double bytes_per_pass);

// The fewest passes a measurement times, however long they take.
constexpr int64_t kSteadinessPasses = 50;

// Times passes for `seconds`, at least kSteadinessPasses of them, after one untimed (the pages'
// first touch). About `seconds` on a host that streams 10 GB/s or more.
Steadiness measure_steadiness(double seconds = 1.0);

// {when, passes, bytes_per_pass, median_bytes_per_s, min_bytes_per_s, max_bytes_per_s, cv}.
nlohmann::json steadiness_json(const Steadiness& s, const std::string& when);

// Why the host did not hold its speed `when` (the passes' CV over the noise verdict's step
// threshold, kNoisyStepCv), or nothing.
std::optional<std::string> steadiness_reason(const Steadiness& s, const std::string& when);

}  // namespace dlb
