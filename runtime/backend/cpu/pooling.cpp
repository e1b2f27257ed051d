// Max and average pooling (PyTorch semantics: floor mode, max ignores padding, average counts it
// by default) and adaptive average pooling with torch's bin edges.
#include <fmt/format.h>

#include <limits>
#include <type_traits>
#include <vector>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/f32_views.h"
#include "runtime/backend/cpu/parallel.h"
#include "runtime/backend/cpu/pointwise_loops.h"
#include "runtime/core/error.h"
#include "runtime/core/stored_float.h"

namespace dlb {
namespace {
struct PoolGeo {
  int64_t planes, h, w, oh, ow;
};
// The shapes alone: the data is read as stored, or from F32Views, by the caller.
PoolGeo pool_geo(const Tensor& x, const Tensor& y) {
  if (x.shape().rank() != 4 || y.shape().rank() != 4) {
    throw InvalidArgument(fmt::format("pooling takes 4-D tensors, not input {} and output {}",
                                      x.shape().str(), y.shape().str()));
  }
  if (x.dim(0) != y.dim(0) || x.dim(1) != y.dim(1)) {
    throw InvalidArgument(fmt::format("pool input {} and output {} differ in N or C",
                                      x.shape().str(), y.shape().str()));
  }
  return {x.dim(0) * x.dim(1), x.dim(2), x.dim(3), y.dim(2), y.dim(3)};
}
// Output (i, j)'s window: its corner, padding included (h0, w0), and the rows [ha, hb) and
// columns [wa, wb) of the input it covers.
struct Window {
  int64_t h0, w0, ha, hb, wa, wb;
};
Window window(const PoolDesc& p, const PoolGeo& g, int64_t i, int64_t j) {
  const int64_t h0 = i * p.stride_h - p.pad_h, w0 = j * p.stride_w - p.pad_w;
  return {h0,
          w0,
          std::max<int64_t>(h0, 0),
          std::min(h0 + p.kernel_h, g.h),
          std::max<int64_t>(w0, 0),
          std::min(w0 + p.kernel_w, g.w)};
}
// Elements an average-pooling window divides by (PyTorch's count_include_pad semantics).
int64_t avg_divisor(const PoolDesc& p, const PoolGeo& g, int64_t h0, int64_t w0) {
  if (p.count_include_pad) {
    return (std::min(h0 + p.kernel_h, g.h + p.pad_h) - h0) *
           (std::min(w0 + p.kernel_w, g.w + p.pad_w) - w0);
  }
  return (std::min(h0 + p.kernel_h, g.h) - std::max<int64_t>(h0, 0)) *
         (std::min(w0 + p.kernel_w, g.w) - std::max<int64_t>(w0, 0));
}
// The window's maximum under takes_max (backend.h): a NaN takes it, the last one in scan order, as
// in PyTorch's max_pool2d (std::max would skip it). Selects, not branches: on random data a
// branch per element mispredicts half the time. Each element is loaded into a float (exact).
template <typename T>
float window_max(const T* x, int64_t w, int64_t ha, int64_t hb, int64_t wa, int64_t wb) {
  float best = -std::numeric_limits<float>::infinity(), last_nan = 0.f;
  bool any_nan = false;
  for (int64_t a = ha; a < hb; ++a) {
    const T* row = x + a * w;
    for (int64_t b = wa; b < wb; ++b) {
      const float v = load(row[b]);
      const bool nan = v != v;
      best = v > best ? v : best;
      last_nan = nan ? v : last_nan;
      any_nan |= nan;
    }
  }
  return any_nan ? last_nan : best;
}
// Where window_max's value is: the first maximum in scan order, or the last NaN, as PyTorch's
// max_pool2d backward sends the gradient. Selects again.
template <typename T>
int64_t window_argmax(const T* x, int64_t w, int64_t ha, int64_t hb, int64_t wa, int64_t wb) {
  int64_t arg = ha * w + wa, last_nan = -1;
  float best = load(x[arg]);
  for (int64_t a = ha; a < hb; ++a) {
    for (int64_t b = wa; b < wb; ++b) {
      const int64_t at = a * w + b;
      const float v = load(x[at]);
      const bool greater = v > best;
      best = greater ? v : best;
      arg = greater ? at : arg;
      last_nan = v != v ? at : last_nan;
    }
  }
  return last_nan >= 0 ? last_nan : arg;
}
int64_t bin_start(int64_t i, int64_t in, int64_t out) { return (i * in) / out; }
int64_t bin_end(int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; }

// Pooling's forward with x and y stored as T: each output computed in float (an average's sum in
// double) and rounded once on store, the same bits as on f32 copies of them (a maximum is one
// of the inputs, stored again exactly).
template <typename T>
void pool_forward_as(const PoolDesc& p, const PoolGeo& g, const T* x, T* y) {
  parallel_for(g.planes, 2, [&](int64_t pl) {
    const T* xp = x + pl * g.h * g.w;
    T* yp = y + pl * g.oh * g.ow;
    for (int64_t i = 0; i < g.oh; ++i) {
      for (int64_t j = 0; j < g.ow; ++j) {
        const Window w = window(p, g, i, j);
        if (p.mode == PoolMode::kMax) {
          yp[i * g.ow + j] = stored<T>(window_max(xp, g.w, w.ha, w.hb, w.wa, w.wb));
        } else {
          double s = 0;
          for (int64_t a = w.ha; a < w.hb; ++a)
            for (int64_t b = w.wa; b < w.wb; ++b) s += load(xp[a * g.w + b]);
          const int64_t count = avg_divisor(p, g, w.h0, w.w0);
          yp[i * g.ow + j] = stored<T>(static_cast<float>(s / count));
        }
      }
    }
  });
}

// One plane's input gradient, summed in f32 into `dp` (zeroed here).
template <typename T>
void pool_plane_backward(const PoolDesc& p, const PoolGeo& g, const T* xp, const T* gp, float* dp) {
  std::fill(dp, dp + g.h * g.w, 0.f);
  for (int64_t i = 0; i < g.oh; ++i) {
    for (int64_t j = 0; j < g.ow; ++j) {
      const Window w = window(p, g, i, j);
      const float grad = load(gp[i * g.ow + j]);
      if (p.mode == PoolMode::kMax) {
        dp[window_argmax(xp, g.w, w.ha, w.hb, w.wa, w.wb)] += grad;
      } else {
        const int64_t count = avg_divisor(p, g, w.h0, w.w0);
        for (int64_t a = w.ha; a < w.hb; ++a)
          for (int64_t b = w.wa; b < w.wb; ++b) dp[a * g.w + b] += grad / count;
      }
    }
  }
}

// Pooling's backward with x, dy and dx stored as T: each plane's gradient summed in f32 and
// rounded once on store (the backend's narrowing loop), the same bits as on f32 copies (the
// output itself is not read).
template <typename T>
void pool_backward_as(const PoolDesc& p, const PoolGeo& g, const T* x, const T* dy, T* dx) {
  const auto narrow = pointwise_loops<T>(host_cpu_isa()).narrow;
  parallel_for(g.planes, 2, [&](int64_t pl) {
    const T* xp = x + pl * g.h * g.w;
    const T* gp = dy + pl * g.oh * g.ow;
    T* dp = dx + pl * g.h * g.w;
    if constexpr (std::is_same_v<T, float>) {
      pool_plane_backward(p, g, xp, gp, dp);
    } else {
      thread_local std::vector<float> sums;  // a plane's, on this thread
      sums.resize(static_cast<size_t>(g.h * g.w));
      pool_plane_backward(p, g, xp, gp, sums.data());
      narrow(sums.data(), dp, g.h * g.w);
    }
  });
}
}  // namespace

void CpuBackend::pool_forward(const PoolDesc& p, const Tensor& x_s, Tensor& y_s) {
  const bool as_stored = stored_as_one({&x_s, &y_s}, "pool");  // first: both allocated
  const PoolGeo g = pool_geo(x_s, y_s);
  if (as_stored) {
    with_stored_float(x_s.dtype(), "pool input", [&](auto t) {
      using T = decltype(t);
      pool_forward_as<T>(p, g, x_s.data<T>(), y_s.data<T>());
    });
    return;
  }
  F32Views f32(*this);
  const Tensor& x = f32.in(x_s);
  Tensor& y = f32.out(y_s);
  check_f32(x, "pool input");
  check_f32(y, "pool output");
  pool_forward_as<float>(p, g, x.data<float>(), y.data<float>());
}

void CpuBackend::pool_backward(const PoolDesc& p, const Tensor& x_s, const Tensor& y_s,
                               const Tensor& dy_s, Tensor& dx_s) {
  const bool as_stored = stored_as_one({&x_s, &dy_s, &dx_s}, "pool backward");
  const PoolGeo g = pool_geo(x_s, y_s);
  check_same_shape(y_s, dy_s, "pool backward: output and its gradient");
  check_same_shape(x_s, dx_s, "pool backward: input and its gradient");
  if (as_stored) {
    with_stored_float(x_s.dtype(), "pool input", [&](auto t) {
      using T = decltype(t);
      pool_backward_as<T>(p, g, x_s.data<T>(), dy_s.data<T>(), dx_s.data<T>());
    });
    return;
  }
  F32Views f32(*this);
  const Tensor& x = f32.in(x_s);
  const Tensor& dy = f32.in(dy_s);
  Tensor& dx = f32.out(dx_s);
  check_f32(x, "pool input");
  check_f32(dy, "pool output gradient");
  check_f32(dx, "pool input gradient");
  pool_backward_as<float>(p, g, x.data<float>(), dy.data<float>(), dx.data<float>());
}

void CpuBackend::adaptive_avg_pool_forward(const Tensor& x_s, Tensor& y_s) {
  F32Views f32(*this);
  const Tensor& x = f32.in(x_s);
  Tensor& y = f32.out(y_s);
  check_f32(x, "pool input");
  check_f32(y, "pool output");
  const PoolGeo g = pool_geo(x, y);
  parallel_for(g.planes, 2, [&](int64_t pl) {
    const float* xp = x.data<float>() + pl * g.h * g.w;
    float* yp = y.data<float>() + pl * g.oh * g.ow;
    for (int64_t i = 0; i < g.oh; ++i) {
      const int64_t ha = bin_start(i, g.h, g.oh), hb = bin_end(i, g.h, g.oh);
      for (int64_t j = 0; j < g.ow; ++j) {
        const int64_t wa = bin_start(j, g.w, g.ow), wb = bin_end(j, g.w, g.ow);
        double s = 0;
        for (int64_t a = ha; a < hb; ++a)
          for (int64_t b = wa; b < wb; ++b) s += xp[a * g.w + b];
        yp[i * g.ow + j] = static_cast<float>(s / ((hb - ha) * (wb - wa)));
      }
    }
  });
}

void CpuBackend::adaptive_avg_pool_backward(const Tensor& dy_s, Tensor& dx_s) {
  F32Views f32(*this);
  const Tensor& dy = f32.in(dy_s);
  Tensor& dx = f32.out(dx_s);
  check_f32(dy, "pool output gradient");
  check_f32(dx, "pool input gradient");
  const PoolGeo g = pool_geo(dx, dy);
  std::fill(dx.data<float>(), dx.data<float>() + dx.numel(), 0.f);
  parallel_for(g.planes, 2, [&](int64_t pl) {
    const float* gp = dy.data<float>() + pl * g.oh * g.ow;
    float* dp = dx.data<float>() + pl * g.h * g.w;
    for (int64_t i = 0; i < g.oh; ++i) {
      const int64_t ha = bin_start(i, g.h, g.oh), hb = bin_end(i, g.h, g.oh);
      for (int64_t j = 0; j < g.ow; ++j) {
        const int64_t wa = bin_start(j, g.w, g.ow), wb = bin_end(j, g.w, g.ow);
        const float share = gp[i * g.ow + j] / static_cast<float>((hb - ha) * (wb - wa));
        for (int64_t a = ha; a < hb; ++a)
          for (int64_t b = wa; b < wb; ++b) dp[a * g.w + b] += share;
      }
    }
  });
}

}  // namespace dlb
