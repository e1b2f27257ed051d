// The math of the CUDA backend's own kernels (the ops cuDNN and cuBLASLt do not do) is one
// functor per kernel, in a header per op family: elementwise_kernels.h, pooling_kernels.h,
// bias_kernels.h, batch_norm_kernels.h, loss_kernels.h and optimizer_kernels.h. Each functor is
// called with one index (an element, a row or an input pixel) and computes exactly that index's
// output, so:
//   - its family's .cu file launches it as a thin grid-stride loop (launch.cuh);
//   - tests/unit/cuda_kernel_math_test.cpp (f32) and cuda_kernel_math_16bit_test.cpp (fp16 and
//     bf16) run the same functor on the host over every index and compare with the CPU backend,
//     which is the reference.
// A per-channel reduction (batch norm's) is instead an accumulator and an add, run a block per
// channel (channel_reduce.h), whose tree the host runs too.
// A functor templated on T reads and writes its data (activations and their gradients) as T: f32,
// or the 16-bit storage of a mixed-precision run (stored.h), loaded into float, computed in float
// (or double, as the CPU backend does) and rounded once on store. Batch-norm scale, shift and
// statistics, the softmax probabilities, the loss, master weights and momentum stay f32 (the
// precision policy's roles). Each has a kName, the NVTX range its launches appear under.
// This header: where an element of an NCHW or NHWC tensor is stored, which every family uses.
// Host-compilable: these headers include nothing of CUDA.
#pragma once
#include <cstdint>

#include "runtime/core/host_device.h"

namespace dlb::cuda {

// Where element (n, c, a, b) of an [N, C, H, W] tensor is stored: NCHW, or NHWC (channels last,
// the CUDA backend's layout for 16-bit activations). The shape is always the logical NCHW one.
struct Nchw {
  int64_t c, h, w;
  bool channels_last;
  DLB_HD int64_t at(int64_t n, int64_t ch, int64_t a, int64_t b) const {
    return channels_last ? ((n * h + a) * w + b) * c + ch : ((n * c + ch) * h + a) * w + b;
  }
  // The coordinates of the element stored at offset i.
  DLB_HD void coords(int64_t i, int64_t& n, int64_t& ch, int64_t& a, int64_t& b) const {
    if (channels_last) {
      ch = i % c;
      const int64_t pixel = i / c;
      b = pixel % w;
      a = (pixel / w) % h;
      n = pixel / (w * h);
    } else {
      b = i % w;
      a = (i / w) % h;
      ch = (i / (w * h)) % c;
      n = i / (w * h * c);
    }
  }
};

// The same for the per-channel ops, which see [N, C, inner] (inner: the pixels of a channel):
// "row" r is (n, c) = (r / C, r % C), and k runs over its inner values.
struct ChannelRows {
  int64_t channels, inner;
  bool channels_last;
  DLB_HD int64_t channel_of(int64_t i) const {
    return channels_last ? i % channels : (i / inner) % channels;
  }
  DLB_HD int64_t at(int64_t row, int64_t k) const {
    return channels_last ? ((row / channels) * inner + k) * channels + row % channels
                         : row * inner + k;
  }
  // Value j of channel c's n * inner (image j / inner, pixel j % inner): the definition that
  // channel_reduce.h's ChannelWalk follows without dividing.
  DLB_HD int64_t value_at(int64_t c, int64_t j) const {
    return at((j / inner) * channels + c, j % inner);
  }
};

// Offset i of a [K, C, R, S] (or any [N, C, inner]) tensor stored NCHW, stored NHWC: how a conv
// weight's f32 master (torchvision's layout) maps onto its channels-last 16-bit copy and
// gradient. `channels` 0: the identity.
struct ToChannelsLast {
  int64_t channels = 0, inner = 1;
  DLB_HD int64_t operator()(int64_t i) const {
    if (channels == 0) return i;
    const int64_t per_n = channels * inner, n = i / per_n, rem = i % per_n;
    return (n * inner + rem % inner) * channels + rem / inner;
  }
};

}  // namespace dlb::cuda
