#include "suites/harness/core/timed_phase.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/core/stats.h"

namespace dlb {

int64_t extra_steps(int64_t steps, double seconds, double min_time) {
  if (steps <= 0 || !(seconds > 0) || seconds >= min_time) return 0;
  const double total = std::ceil(static_cast<double>(steps) * min_time / seconds);
  const double most = std::numeric_limits<int32_t>::max();
  return static_cast<int64_t>(std::min(total, most)) - steps;
}

StepFences step_fences(const std::vector<double>& t) {
  const double q1 = percentile(t, 25), q3 = percentile(t, 75), median = percentile(t, 50);
  return {std::min(q1 - 1.5 * (q3 - q1), 0.95 * median),
          std::max(q3 + 1.5 * (q3 - q1), 1.05 * median)};
}

int64_t unsettled_steps(const std::vector<double>& t, int64_t limit) {
  const size_t n = t.size();
  if (n < 4) return 0;
  const std::vector<double> later(t.begin() + static_cast<std::ptrdiff_t>(n / 2), t.end());
  const double fence = step_fences(later).high;
  const size_t most = std::min(n / 2, static_cast<size_t>(std::max<int64_t>(limit, 0)));
  size_t k = 0;
  while (k < most && t[k] > fence) ++k;
  return static_cast<int64_t>(k);
}

Spread spread(const std::vector<double>& x) {
  const double n = static_cast<double>(x.size());
  double mean = 0;
  for (double v : x) mean += v;
  mean = x.empty() ? 0 : mean / n;
  double ss = 0;
  for (double v : x) ss += (v - mean) * (v - mean);
  const double sd = x.size() > 1 ? std::sqrt(ss / (n - 1)) : 0.0;
  return {mean, sd, mean > 0 ? sd / mean : 0.0};
}

nlohmann::json repetition_json(const std::vector<double>& x) {
  const Spread s = spread(x);
  return {{"count", x.size()}, {"throughput_img_s", x}, {"median", percentile(x, 50)},
          {"mean", s.mean},    {"stddev", s.sd},        {"cv", s.cv}};
}

}  // namespace dlb
