#include "runtime/core/resample.h"

#include <algorithm>
#include <cmath>

namespace dlb {
namespace {

double triangle(double x) {
  x = std::fabs(x);
  return x < 1 ? 1 - x : 0;
}

}  // namespace

ResampleTaps resample_taps(int64_t in_size, int64_t out_size) {
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double filterscale = std::max(scale, 1.0);
  const double support = 1.0 * filterscale;
  ResampleTaps t;
  t.size = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  t.first.resize(static_cast<size_t>(out_size));
  t.count.resize(static_cast<size_t>(out_size));
  t.weights.assign(static_cast<size_t>(out_size * t.size), 0);
  std::vector<double> w(static_cast<size_t>(t.size));
  for (int64_t xx = 0; xx < out_size; ++xx) {
    const double center = (static_cast<double>(xx) + 0.5) * scale;
    const auto xmin = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const auto xmax = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in_size);
    double sum = 0;
    for (int64_t x = xmin; x < xmax; ++x) {
      w[static_cast<size_t>(x - xmin)] =
          triangle((static_cast<double>(x) - center + 0.5) / filterscale);
      sum += w[static_cast<size_t>(x - xmin)];
    }
    t.first[static_cast<size_t>(xx)] = xmin;
    t.count[static_cast<size_t>(xx)] = xmax - xmin;
    int32_t* k = &t.weights[static_cast<size_t>(xx * t.size)];
    for (int64_t x = 0; x < xmax - xmin; ++x) {
      const double v = w[static_cast<size_t>(x)];
      const double fixed = (sum != 0 ? v / sum : v) * (1 << kResamplePrecisionBits);
      k[x] = static_cast<int32_t>(fixed < 0 ? fixed - 0.5 : fixed + 0.5);
    }
  }
  return t;
}

}  // namespace dlb
