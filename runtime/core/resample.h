// PIL's antialiased bilinear resampling of 8-bit images (Image.resize with BILINEAR, which
// torchvision's functional.resize calls for a PIL image), as fixed-point taps: a triangle filter
// widened by the reduction factor, separable, each output pixel a sum of integer weights in 22-bit
// fixed point, rounded to 8 bits. Integer sums give the same bytes in any order, so the CPU's
// loops (workloads/data/resample_loops.inl) and the CUDA kernels (backend/cuda/image_kernels.h)
// that share these taps give the same bytes.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/core/host_device.h"

namespace dlb {

// PIL's fixed point for 8-bit resampling (Resample.c): 32 - 8 - 2 bits of fraction.
inline constexpr int kResamplePrecisionBits = 32 - 8 - 2;

// Every output pixel's taps along one axis, as PIL lays them out: the first input pixel and a
// count per output pixel, and `size` weights each (the unused ones 0).
struct ResampleTaps {
  int64_t size = 0;
  std::vector<int64_t> first, count;
  std::vector<int32_t> weights;  // out_size x size
};

// PIL's precompute_coeffs for a bilinear filter over [0, in_size) to out_size pixels, then
// normalize_coeffs_8bpc: each weight in 22-bit fixed point, rounded half away from zero.
ResampleTaps resample_taps(int64_t in_size, int64_t out_size);

// A sum's start: half of the last place, so that the shift below rounds.
DLB_HD int32_t resample_start() { return int32_t{1} << (kResamplePrecisionBits - 1); }

// PIL's clip8: the fixed-point sum's integer part, within [0, 255]. The sum fits an int32 as in
// PIL (255 x 2^22 and the rounding half below 2^31).
DLB_HD uint8_t resample_clip8(int32_t acc) {
  const int32_t v = acc >> kResamplePrecisionBits;
  return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

}  // namespace dlb
