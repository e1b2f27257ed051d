// Batch normalization's per-channel loops on raw storage: in training, the statistics and
// y = x * scale + shift (with its ReLU where fused), and the backward pass; in inference, the
// affine from the running statistics. Sums accumulate in
// double, in eight lanes (LaneSum in batch_norm_loops.inl), so no result depends on the thread
// count. Compiled for x86-64 and for AVX-512 (runtime/backend/cpu/isa.h), the same bits on both.
#pragma once
#include <cstdint>

#include "runtime/backend/cpu/isa.h"
#include "runtime/core/stored_float.h"

namespace dlb {

// x is [n, c, inner] (inner: the pixels of one channel of one image), NCHW, or [n, inner, c]
// channels last (NHWC).
struct BnDims {
  int64_t n, c, inner;
};

// One training pass of batch norm, data stored as T; the parameters and statistics are f32.
template <typename T>
struct BnTrainArgs {
  BnDims d;
  const T* x;
  T* y;
  const float *gamma, *beta;
  float *running_mean, *running_var, *save_mean, *save_invstd;
  float momentum, eps;
  bool relu;  // max(y, 0) after the affine (NaN and -0 pass, as relu_forward's)
};

// Its backward pass: with `y` (the fused pair's output; null otherwise) of dy where y > 0, NaN
// included, as relu_backward's mask. dx may be dy.
template <typename T>
struct BnBackwardArgs {
  BnDims d;
  const T *x, *y, *dy;
  T* dx;
  const float *gamma, *save_mean, *save_invstd;
  float *dgamma, *dbeta;
};

// Inference: y = x * scale + shift from the running statistics, in float, rounded once on store.
template <typename T>
struct BnInferArgs {
  BnDims d;
  const T* x;
  T* y;
  const float *gamma, *beta, *running_mean, *running_var;
  float eps;
};

// Each NCHW loop does one channel, each channels-last loop a range of them [c0, c1) (reading
// each row of channels contiguously), so a caller splits the channels over its threads. Both give
// the same bits.
template <typename T>
struct BnLoops {
  void (*train)(const BnTrainArgs<T>& a, int64_t channel);
  void (*backward)(const BnBackwardArgs<T>& a, int64_t channel);
  void (*infer)(const BnInferArgs<T>& a, int64_t channel);
  void (*train_channels_last)(const BnTrainArgs<T>& a, int64_t c0, int64_t c1);
  void (*backward_channels_last)(const BnBackwardArgs<T>& a, int64_t c0, int64_t c1);
  void (*infer_channels_last)(const BnInferArgs<T>& a, int64_t c0, int64_t c1);
};

// The loops compiled for `isa`, which the CPU must run (host_cpu_isa() or below).
template <typename T>
const BnLoops<T>& bn_loops(CpuIsa isa);

}  // namespace dlb
