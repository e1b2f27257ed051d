// Batch norm's kernels' math (kernel_layout.h says how these headers work): the running
// statistics after a cuDNN graph, inference, and training both ways on our own kernels when cuDNN
// has no engine for a shape. Host-compilable.
#pragma once
#include <cmath>
#include <cstdint>

#include "runtime/backend/cuda/channel_reduce.h"
#include "runtime/backend/cuda/kernel_layout.h"
#include "runtime/backend/cuda/stored.h"
#include "runtime/core/host_device.h"

namespace dlb::cuda {

// PyTorch's running statistics from one batch's saved mean and 1/sqrt(var + eps), per channel:
// running = (1 - momentum) * running + momentum * batch, with the unbiased variance
// var * m / (m - 1) over m values per channel. The batch variance is recovered from the saved
// inverse standard deviation (in double: a few float roundings of relative error).
struct BatchNormRunningUpdate {
  static constexpr const char* kName = "batch norm running statistics";
  const float* save_mean;
  const float* save_invstd;
  double eps, momentum;
  int64_t m;
  float* running_mean;
  float* running_var;
  int64_t* count = nullptr;  // num_batches_tracked, advanced by channel 0 (null: not advanced)
  DLB_HD void operator()(int64_t c) const {
    if (count && c == 0) *count += 1;
    const double invstd = save_invstd[c];
    const double var = 1.0 / (invstd * invstd) - eps;
    const double unbiased =
        (var > 0 ? var : 0) * static_cast<double>(m) / static_cast<double>(m - 1);
    running_mean[c] =
        static_cast<float>((1 - momentum) * running_mean[c] + momentum * save_mean[c]);
    running_var[c] = static_cast<float>((1 - momentum) * running_var[c] + momentum * unbiased);
  }
};

// Batch norm with the running statistics (evaluation), one element per index, as the CPU
// backend computes it: scale = gamma / sqrt(var + eps), shift = beta - mean * scale, in float.
template <typename T>
struct BatchNormInfer {
  static constexpr const char* kName = "batch norm inference";
  const T* x;
  const float* gamma;
  const float* beta;
  const float* running_mean;
  const float* running_var;
  float eps;
  ChannelRows rows;
  T* y;
  DLB_HD void operator()(int64_t i) const {
    const int64_t c = rows.channel_of(i);
    const float invstd = 1.f / sqrtf(running_var[c] + eps);
    const float scale = gamma[c] * invstd;
    const float shift = beta[c] - running_mean[c] * scale;
    y[i] = stored<T>(load(x[i]) * scale + shift);
  }
};

// Batch norm in training on our own kernels: what the CUDA backend runs when cuDNN has no engine
// for a batch-norm graph. Each channel's mean and variance by Welford's update in double, one
// block per (channel, part) (channel_reduce.h), where the CPU backend sums twice in double (the
// mean, then the squared deviations): the two agree to within double rounding. Then, per channel,
// the statistics (BatchNormStatistics), and y element-wise.
template <typename T>
struct BatchNormMoments {
  static constexpr const char* kName = "batch norm moments";
  using Acc = Welford;
  const T* x;
  ChannelRows layout;
  DLB_HD void add(Welford& a, int64_t, int64_t at) const { a.add(load(x[at])); }
};
// Per channel: its parts' moments merged in part order; the variance, the saved statistics,
// PyTorch's running statistics (the unbiased variance over m values), and the affine that
// normalizes (channel[4c + 1] = scale, [4c + 2] = shift; 4 doubles per channel).
struct BatchNormStatistics {
  static constexpr const char* kName = "batch norm statistics";
  const Welford* parts;
  int64_t parts_per_channel;
  const float* gamma;
  const float* beta;
  float eps, momentum;
  double* channel;
  float* save_mean;
  float* save_invstd;
  float* running_mean;
  float* running_var;
  int64_t* count = nullptr;  // num_batches_tracked, advanced by channel 0 (null: not advanced)
  DLB_HD void operator()(int64_t c) const {
    if (count && c == 0) *count += 1;
    Welford w{};
    for (int64_t p = 0; p < parts_per_channel; ++p) {
      w = Welford::merge(w, parts[c * parts_per_channel + p]);
    }
    const double mean = w.mean, m = w.count;
    const double var = w.m2 / m;
    const double invstd = 1.0 / sqrt(var + eps);
    save_mean[c] = static_cast<float>(mean);
    save_invstd[c] = static_cast<float>(invstd);
    running_mean[c] = static_cast<float>((1 - momentum) * running_mean[c] + momentum * mean);
    running_var[c] =
        static_cast<float>((1 - momentum) * running_var[c] + momentum * var * m / (m - 1));
    const float scale = static_cast<float>(gamma[c] * invstd);
    channel[4 * c + 1] = scale;
    channel[4 * c + 2] = static_cast<float>(beta[c] - mean * scale);
  }
};
template <typename T>
struct BatchNormNormalize {  // y = x * scale + shift, in float
  static constexpr const char* kName = "batch norm normalize";
  const T* x;
  const double* channel;
  ChannelRows rows;
  T* y;
  DLB_HD void operator()(int64_t i) const {
    const int64_t c = rows.channel_of(i);
    y[i] = stored<T>(load(x[i]) * static_cast<float>(channel[4 * c + 1]) +
                     static_cast<float>(channel[4 * c + 2]));
  }
};

// Batch norm's backward on our own kernels, the CPU backend's arithmetic: per channel, the sums
// of dy and of dy * xhat in double, one block per (channel, part) (channel_reduce.h); then per
// channel, dgamma and dbeta (of the gradients' type G) and the constants of dx (channel[4c] =
// gamma * invstd, [4c + 1] = mean dy, [4c + 2] = mean dy * xhat); then dx.
template <typename T>
struct BatchNormBackwardSums {
  static constexpr const char* kName = "batch norm backward sums";
  using Acc = SumPair;
  const T* x;
  const T* dy;
  const float* save_mean;
  const float* save_invstd;
  ChannelRows layout;
  DLB_HD void add(SumPair& a, int64_t c, int64_t at) const {
    const float g = load(dy[at]);
    a.first += g;
    a.second +=
        g * (load(x[at]) - static_cast<double>(save_mean[c])) * static_cast<double>(save_invstd[c]);
  }
};
template <typename G>
struct BatchNormBackwardChannel {
  static constexpr const char* kName = "batch norm backward channels";
  const SumPair* parts;
  int64_t parts_per_channel, m;
  const float* gamma;
  const float* save_invstd;
  double* channel;
  G* dgamma;
  G* dbeta;
  DLB_HD void operator()(int64_t c) const {
    SumPair s{};
    for (int64_t p = 0; p < parts_per_channel; ++p) {
      s = SumPair::merge(s, parts[c * parts_per_channel + p]);
    }
    dgamma[c] = stored<G>(static_cast<float>(s.second));
    dbeta[c] = stored<G>(static_cast<float>(s.first));
    channel[4 * c] = gamma[c] * static_cast<double>(save_invstd[c]);
    channel[4 * c + 1] = s.first / static_cast<double>(m);
    channel[4 * c + 2] = s.second / static_cast<double>(m);
  }
};
template <typename T>
struct BatchNormBackwardData {
  static constexpr const char* kName = "batch norm backward data";
  const T* x;
  const T* dy;
  const float* save_mean;
  const float* save_invstd;
  const double* channel;
  ChannelRows rows;
  T* dx;
  DLB_HD void operator()(int64_t i) const {
    const int64_t c = rows.channel_of(i);
    const double xhat = (load(x[i]) - static_cast<double>(save_mean[c])) * save_invstd[c];
    dx[i] = stored<T>(static_cast<float>(
        channel[4 * c] * (load(dy[i]) - channel[4 * c + 1] - xhat * channel[4 * c + 2])));
  }
};

}  // namespace dlb::cuda
