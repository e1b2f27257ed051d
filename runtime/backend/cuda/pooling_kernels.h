// The pooling kernels' math (kernel_layout.h says how these headers work): max and average
// pooling and adaptive average pooling, both passes, in either layout. Host-compilable.
#pragma once
#include <cmath>
#include <cstdint>

#include "runtime/backend/backend.h"
#include "runtime/backend/cuda/kernel_layout.h"
#include "runtime/backend/cuda/stored.h"
#include "runtime/core/host_device.h"

namespace dlb::cuda {

// torch's adaptive pooling bins: output i of `out` averages inputs [start, end) of `in`.
DLB_HD int64_t adaptive_bin_start(int64_t i, int64_t in, int64_t out) { return (i * in) / out; }
DLB_HD int64_t adaptive_bin_end(int64_t i, int64_t in, int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

// One output element of adaptive average pooling over [N, C, h, w] -> [N, C, oh, ow]; x and y
// each in its own layout (a pool before a flatten writes NCHW from a channels-last input).
template <typename T>
struct AdaptiveAvgPoolForward {
  static constexpr const char* kName = "adaptive avg pool forward";
  const T* x;
  Nchw in, out;
  T* y;
  DLB_HD void operator()(int64_t o) const {
    int64_t n, c, i, j;
    out.coords(o, n, c, i, j);
    const int64_t h = in.h, w = in.w;
    const int64_t ha = adaptive_bin_start(i, h, out.h), hb = adaptive_bin_end(i, h, out.h);
    const int64_t wa = adaptive_bin_start(j, w, out.w), wb = adaptive_bin_end(j, w, out.w);
    double s = 0;
    for (int64_t a = ha; a < hb; ++a) {
      for (int64_t b = wa; b < wb; ++b) s += load(x[in.at(n, c, a, b)]);
    }
    y[o] = stored<T>(static_cast<float>(s / static_cast<double>((hb - ha) * (wb - wa))));
  }
};

// One input element's gradient: the sum, over the output bins that cover it (in row-major order),
// of dy / bin area. Gathering instead of scattering needs no atomics, and adds the same terms in
// the same order as the CPU backend's scatter. dy is in the output's layout, dx in the input's.
template <typename T>
struct AdaptiveAvgPoolBackward {
  static constexpr const char* kName = "adaptive avg pool backward";
  const T* dy;
  Nchw in, out;
  T* dx;
  DLB_HD void operator()(int64_t e) const {
    int64_t n, c, a, b;
    in.coords(e, n, c, a, b);
    const int64_t h = in.h, w = in.w, oh = out.h, ow = out.w;
    float sum = 0.f;
    // Bins i with start(i) <= a < end(i) lie in [a * oh / h, (a + 1) * oh / h], checked exactly.
    const int64_t i_first = a * oh / h, i_last = ((a + 1) * oh + h - 1) / h;
    const int64_t j_first = b * ow / w, j_last = ((b + 1) * ow + w - 1) / w;
    for (int64_t i = i_first; i <= i_last && i < oh; ++i) {
      const int64_t ha = adaptive_bin_start(i, h, oh), hb = adaptive_bin_end(i, h, oh);
      if (a < ha || a >= hb) continue;
      for (int64_t j = j_first; j <= j_last && j < ow; ++j) {
        const int64_t wa = adaptive_bin_start(j, w, ow), wb = adaptive_bin_end(j, w, ow);
        if (b < wa || b >= wb) continue;
        sum += load(dy[out.at(n, c, i, j)]) / static_cast<float>((hb - ha) * (wb - wa));
      }
    }
    dx[e] = stored<T>(sum);
  }
};

// The window of output (i, j) of max or average pooling, clipped to the input: rows [ha, hb),
// columns [wa, wb). h0 and w0 are its unclipped corner.
struct PoolWindow {
  int64_t h0, w0, ha, hb, wa, wb;
};
DLB_HD PoolWindow pool_window(const PoolDesc& p, int64_t h, int64_t w, int64_t i, int64_t j) {
  PoolWindow win;
  win.h0 = i * p.stride_h - p.pad_h;
  win.w0 = j * p.stride_w - p.pad_w;
  win.ha = win.h0 > 0 ? win.h0 : 0;
  win.hb = win.h0 + p.kernel_h < h ? win.h0 + p.kernel_h : h;
  win.wa = win.w0 > 0 ? win.w0 : 0;
  win.wb = win.w0 + p.kernel_w < w ? win.w0 + p.kernel_w : w;
  return win;
}
// What an average-pooling window divides by: with count_include_pad, the window clipped to the
// padded input; without, to the input.
DLB_HD int64_t pool_divisor(const PoolDesc& p, int64_t h, int64_t w, const PoolWindow& win) {
  if (p.count_include_pad) {
    const int64_t he = win.h0 + p.kernel_h < h + p.pad_h ? win.h0 + p.kernel_h : h + p.pad_h;
    const int64_t we = win.w0 + p.kernel_w < w + p.pad_w ? win.w0 + p.kernel_w : w + p.pad_w;
    return (he - win.h0) * (we - win.w0);
  }
  return (win.hb - win.ha) * (win.wb - win.wa);
}
// The first maximum of a window in row-major order, or its last NaN (PyTorch's max_pool2d rule,
// in both passes), as a*w + b within its channel.
template <typename T>
DLB_HD int64_t pool_argmax(const T* x, const Nchw& in, int64_t n, int64_t c,
                           const PoolWindow& win) {
  int64_t arg_a = win.ha, arg_b = win.wa;
  for (int64_t a = win.ha; a < win.hb; ++a) {
    for (int64_t b = win.wa; b < win.wb; ++b) {
      if (takes_max(load(x[in.at(n, c, a, b)]), load(x[in.at(n, c, arg_a, arg_b)]))) {
        arg_a = a;
        arg_b = b;
      }
    }
  }
  return arg_a * in.w + arg_b;
}

// The output windows that cover input element (a, b), in row-major order: rows i with
// i * stride - pad <= a < i * stride - pad + kernel, within the output, and columns likewise.
struct CoveringWindows {
  int64_t i_first, i_last, j_first, j_last;
};
DLB_HD CoveringWindows covering_windows(const PoolDesc& p, int64_t a, int64_t b, const Nchw& out) {
  const int64_t top = a + p.pad_h - p.kernel_h + 1, left = b + p.pad_w - p.kernel_w + 1;
  const int64_t i_last = (a + p.pad_h) / p.stride_h, j_last = (b + p.pad_w) / p.stride_w;
  return {top > 0 ? (top + p.stride_h - 1) / p.stride_h : 0, i_last < out.h ? i_last : out.h - 1,
          left > 0 ? (left + p.stride_w - 1) / p.stride_w : 0, j_last < out.w ? j_last : out.w - 1};
}

// One output element of max or average pooling over [N, C, h, w] -> [N, C, oh, ow] (floor mode,
// as PyTorch's default): the maximum ignores padding; the average sums in double. x and y each
// in its own layout.
template <typename T>
struct PoolForward {
  static constexpr const char* kName = "pool forward";
  PoolDesc p;
  const T* x;
  Nchw in, out;
  T* y;
  DLB_HD void operator()(int64_t o) const {
    int64_t n, c, i, j;
    out.coords(o, n, c, i, j);
    const PoolWindow win = pool_window(p, in.h, in.w, i, j);
    if (p.mode == PoolMode::kMax) {
      float best = -INFINITY;
      for (int64_t a = win.ha; a < win.hb; ++a) {
        for (int64_t b = win.wa; b < win.wb; ++b) {
          const float v = load(x[in.at(n, c, a, b)]);
          best = takes_max(v, best) ? v : best;
        }
      }
      y[o] = stored<T>(best);
      return;
    }
    double s = 0;
    for (int64_t a = win.ha; a < win.hb; ++a) {
      for (int64_t b = win.wa; b < win.wb; ++b) s += load(x[in.at(n, c, a, b)]);
    }
    y[o] = stored<T>(static_cast<float>(s / static_cast<double>(pool_divisor(p, in.h, in.w, win))));
  }
};

// One input element's pooling gradient, gathered over the windows that cover it in row-major
// order: max pooling adds dy of each window whose first maximum it is; average pooling adds
// dy / divisor of each. Same terms, same order as the CPU backend's scatter; no atomics. x and
// dx in the input's layout, dy in the output's.
template <typename T>
struct PoolBackward {
  static constexpr const char* kName = "pool backward";
  PoolDesc p;
  const T* x;
  const T* dy;
  Nchw in, out;
  T* dx;
  DLB_HD void operator()(int64_t e) const {
    int64_t n, c, a, b;
    in.coords(e, n, c, a, b);
    const CoveringWindows cover = covering_windows(p, a, b, out);
    float sum = 0.f;
    for (int64_t i = cover.i_first; i <= cover.i_last; ++i) {
      for (int64_t j = cover.j_first; j <= cover.j_last; ++j) {
        const PoolWindow win = pool_window(p, in.h, in.w, i, j);
        if (p.mode == PoolMode::kMax) {
          if (pool_argmax(x, in, n, c, win) == a * in.w + b) sum += load(dy[out.at(n, c, i, j)]);
        } else {
          sum +=
              load(dy[out.at(n, c, i, j)]) / static_cast<float>(pool_divisor(p, in.h, in.w, win));
        }
      }
    }
    dx[e] = stored<T>(sum);
  }
};

// Max pooling that keeps where each output's maximum is (pool_argmax: a * w + b within the
// channel): the same y as PoolForward's (the value at that place, stored as PoolForward stores
// its maximum), and the place in `argmax`, in the output's layout.
template <typename T>
struct MaxPoolForwardArgmax {
  static constexpr const char* kName = "max pool forward (argmax)";
  PoolDesc p;
  const T* x;
  Nchw in, out;
  T* y;
  int64_t* argmax;
  DLB_HD void operator()(int64_t o) const {
    int64_t n, c, i, j;
    out.coords(o, n, c, i, j);
    const int64_t arg = pool_argmax(x, in, n, c, pool_window(p, in.h, in.w, i, j));
    argmax[o] = arg;
    y[o] = stored<T>(load(x[in.at(n, c, arg / in.w, arg % in.w)]));
  }
};

// Max pooling's gradient from the saved places: PoolBackward's gather over the windows that
// cover an input element, in the same order, with one read of each window's place instead of a
// search of the window. The same terms, so the same bits.
template <typename T>
struct MaxPoolBackwardArgmax {
  static constexpr const char* kName = "max pool backward (argmax)";
  PoolDesc p;
  const int64_t* argmax;
  const T* dy;
  Nchw in, out;
  T* dx;
  DLB_HD void operator()(int64_t e) const {
    int64_t n, c, a, b;
    in.coords(e, n, c, a, b);
    const CoveringWindows cover = covering_windows(p, a, b, out);
    const int64_t place = a * in.w + b;
    float sum = 0.f;
    for (int64_t i = cover.i_first; i <= cover.i_last; ++i) {
      for (int64_t j = cover.j_first; j <= cover.j_last; ++j) {
        const int64_t o = out.at(n, c, i, j);
        if (argmax[o] == place) sum += load(dy[o]);
      }
    }
    dx[e] = stored<T>(sum);
  }
};

}  // namespace dlb::cuda
