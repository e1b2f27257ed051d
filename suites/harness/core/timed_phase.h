// How long the timed phase runs and which of its steps count (docs/metrics.md, "Timed phase"):
//   - at least `steps` steps and at least `min_time` seconds, as google/benchmark's min_time:
//     extra_steps says how many more steps the time asks for, from the steps' own pace;
//   - after the fixed warm-up (none asked: none judged), the first timed steps are judged from
//     the data: those still above the later steps' upper fence (step_fences of the second half)
//     are discarded until the first that is within it (unsettled_steps), and the record says how
//     many. The first phase may then time fewer than `steps` steps;
//   - `repetitions` timed phases, each with its throughput; repetition_json their aggregates.
// Pure: tests give them hand-made times.
#pragma once
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

namespace dlb {

// More steps to time after `steps` took `seconds`, so that all of them take at least `min_time`
// at the same pace: 0 when the time is already enough (or nothing was timed).
int64_t extra_steps(int64_t steps, double seconds, double min_time);

// Tukey's fences over step times, Q1 - 1.5 IQR and Q3 + 1.5 IQR, each at least 5% from the
// median: steps a GPU times alike (IQR near 0) are not outliers for a 0.1% difference.
struct StepFences {
  double low, high;
};
StepFences step_fences(const std::vector<double>& step_seconds);

// The leading steps to discard: above the upper fence of the second half's times, up to the
// first one within it; at most half the steps, and at most `limit` (the steps before the first
// traced one: a traced step is never left out). Fewer than 4 steps: none.
int64_t unsettled_steps(const std::vector<double>& step_seconds,
                        int64_t limit = std::numeric_limits<int64_t>::max());

// The mean, sample standard deviation and coefficient of variation of some values (0 where
// they have fewer than two, or a mean that is not positive).
struct Spread {
  double mean, sd, cv;
};
Spread spread(const std::vector<double>& values);

// {count, throughput_img_s: [...], median, mean, stddev (sample), cv}.
nlohmann::json repetition_json(const std::vector<double>& throughputs);

}  // namespace dlb
