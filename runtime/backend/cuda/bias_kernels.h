// The bias's kernels' math (kernel_layout.h says how these headers work): a convolution's or
// linear layer's bias added, and its gradient in three short passes. Host-compilable.
#pragma once
#include <cstdint>

#include "runtime/backend/cuda/kernel_layout.h"
#include "runtime/backend/cuda/stored.h"
#include "runtime/core/host_device.h"

namespace dlb::cuda {

// y[n, c, ...] += b[c] over [n, c, inner]; b is the layer's compute weight, of y's type.
template <typename T>
struct BiasAdd {
  static constexpr const char* kName = "bias add";
  const T* b;
  ChannelRows rows;
  T* y;
  DLB_HD void operator()(int64_t i) const {
    y[i] = stored<T>(load(y[i]) + load(b[rows.channel_of(i)]));
  }
};

// The bias gradient in three passes, each thread's chain short: partial sums in double, each over
// every lanes-th value of an (n, c) row (about 64 values); each row's sum of its lanes partials
// (at most 256); each channel's sum over n (BiasChannelSum). With more than one lane, consecutive
// indices read consecutive addresses in either layout (NCHW: a row's lanes; NHWC: the channels),
// so a warp's loads coalesce, and a row of VGG's first layer (50,176 values) is summed by 256
// threads, not one. The CPU backend sums each channel in one double; the two agree to within
// double rounding, far below a float's.
template <typename T>
struct BiasPartialSums {
  static constexpr const char* kName = "bias gradient partial sums";
  const T* dy;
  ChannelRows layout;
  int64_t lanes;
  double* partials;  // [n, lanes, c]
  DLB_HD void operator()(int64_t e) const {
    const int64_t c = layout.channels;
    int64_t n, ch, lane;
    if (layout.channels_last) {
      ch = e % c;
      lane = (e / c) % lanes;
      n = e / (c * lanes);
    } else {
      lane = e % lanes;
      ch = (e / lanes) % c;
      n = e / (lanes * c);
    }
    double s = 0;
    for (int64_t k = lane; k < layout.inner; k += lanes) s += load(dy[layout.at(n * c + ch, k)]);
    partials[(n * lanes + lane) * c + ch] = s;
  }
};
// Row r's sum of its lanes partial sums, in lane order.
struct BiasLaneSum {
  static constexpr const char* kName = "bias gradient rows";
  const double* partials;  // [n, lanes, c]
  int64_t channels, lanes;
  double* rows;  // [n * c]
  DLB_HD void operator()(int64_t r) const {
    const int64_t n = r / channels, ch = r % channels;
    double s = 0;
    for (int64_t lane = 0; lane < lanes; ++lane) s += partials[(n * lanes + lane) * channels + ch];
    rows[r] = s;
  }
};
// How many partial sums per (n, c) row: about 64 values each, at most 256, and no more lanes
// than keep the partials within 2^22 (32 MiB of doubles) while there are two or more.
inline int64_t bias_lanes(int64_t n, int64_t channels, int64_t inner) {
  int64_t lanes = inner / 64;
  if (lanes > 256) lanes = 256;
  while (lanes > 1 && n * channels * lanes > (int64_t{1} << 22)) lanes /= 2;
  return lanes < 1 ? 1 : lanes;
}
template <typename T>
struct BiasChannelSum {
  static constexpr const char* kName = "bias gradient channels";
  const double* rows;
  int64_t n, channels;
  T* db;
  DLB_HD void operator()(int64_t c) const {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += rows[i * channels + c];
    db[c] = stored<T>(static_cast<float>(s));
  }
};

}  // namespace dlb::cuda
