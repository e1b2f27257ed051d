// Time intervals as sorted, disjoint lists: what the trace metrics (runtime/trace/comm_metrics.h)
// and the measured scaling-loss breakdown (suites/harness/core/measured_loss.h) measure with.
#pragma once
#include <algorithm>
#include <utility>
#include <vector>

namespace dlb {

using Interval = std::pair<double, double>;  // [start, end)

// Sorted, overlapping and touching intervals joined.
inline std::vector<Interval> merged(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const auto& iv : v) {
    if (!out.empty() && iv.first <= out.back().second) {
      out.back().second = std::max(out.back().second, iv.second);
    } else {
      out.push_back(iv);
    }
  }
  return out;
}

// The intersection of two merged lists.
inline std::vector<Interval> intersected(const std::vector<Interval>& a,
                                         const std::vector<Interval>& b) {
  std::vector<Interval> out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const double lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
    if (lo < hi) out.push_back({lo, hi});
    (a[i].second < b[j].second ? i : j) += 1;
  }
  return out;
}

inline double length(const std::vector<Interval>& v) {
  double total = 0;
  for (const auto& [start, end] : v) total += end - start;
  return total;
}

}  // namespace dlb
