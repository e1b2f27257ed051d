// Max pooling's window scan on channels-last storage, every channel of a pixel at once: compiled
// for x86-64 and for AVX-512 (runtime/backend/cpu/isa.h), the same bits on both. The portable
// build's selects of a float comparison into int32 positions do not vectorise on x86-64's SSE2;
// AVX-512's masks take them.
#pragma once
#include <cstdint>

#include "runtime/backend/cpu/isa.h"
#include "runtime/core/stored_float.h"

namespace dlb {

template <typename T>
struct PoolLoops {
  // The window of rows [ha, hb) and columns [wa, wb) of an image `width` pixels wide, each pixel
  // `c` channels of x: for each channel, into arg[ch], the pixel (a * width + b) of the first
  // maximum in scan order (row by row), or of the last NaN, where PyTorch's max_pool2d backward
  // sends the gradient. `best` and `last_nan` are c elements of scratch.
  void (*window_argmax)(const T* x, int64_t width, int64_t c, int64_t ha, int64_t hb, int64_t wa,
                        int64_t wb, int32_t* arg, float* best, int32_t* last_nan);
};

// The loops compiled for `isa`, which the CPU must run (host_cpu_isa() or below).
template <typename T>
const PoolLoops<T>& pool_loops(CpuIsa isa);

}  // namespace dlb
