// Summary statistics of repeated timings: median and percentiles with linear interpolation
// between order statistics (numpy's default), so figures agree with the Python reports.
#pragma once
#include <vector>

namespace dlb {

double percentile(std::vector<double> values, double q);  // q in [0, 100]; empty -> 0

}  // namespace dlb
