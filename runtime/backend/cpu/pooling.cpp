// Max and average pooling (PyTorch semantics: floor mode, max ignores padding, average counts it
// by default) and adaptive average pooling with torch's bin edges, on NCHW or channels-last
// tensors (input and output may differ: a pooling a flatten reads writes NCHW), the same bits.
#include <fmt/format.h>

#include <limits>
#include <type_traits>
#include <vector>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/f32_views.h"
#include "runtime/backend/cpu/parallel.h"
#include "runtime/backend/cpu/pointwise_loops.h"
#include "runtime/backend/cpu/pool_loops.h"
#include "runtime/core/error.h"
#include "runtime/core/stored_float.h"

namespace dlb {
namespace {
// Where a tensor keeps plane pl (one channel of one image) and the pixels in it: NCHW's planes
// are contiguous; channels last's pixels are `channels` elements apart.
struct Planes {
  int64_t channels, pixels;
  bool last;
  int64_t base(int64_t pl) const {
    return last ? (pl / channels) * pixels * channels + pl % channels : pl * pixels;
  }
  int64_t step() const { return last ? channels : 1; }
};
Planes planes_of(const Tensor& t) {
  return {t.dim(1), t.dim(2) * t.dim(3), t.layout() == Layout::kNHWC};
}
struct PoolGeo {
  int64_t planes, h, w, oh, ow;
  Planes in, out;  // x's (and dx's), y's (and dy's)
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
  for (const Tensor* t : {&x, &y}) {
    if (t->layout() != Layout::kNCHW && t->layout() != Layout::kNHWC) {
      throw InvalidArgument(
          fmt::format("pooling takes NCHW or NHWC tensors, not {}", layout_name(t->layout())));
    }
  }
  return {x.dim(0) * x.dim(1), x.dim(2), x.dim(3), y.dim(2), y.dim(3), planes_of(x), planes_of(y)};
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
// max_pool2d backward sends the gradient. Selects again. Returns the pixel's index in the plane.
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

// Channels last, image by image and output pixel by output pixel, every channel of a pixel at
// once (contiguous): each channel's window scanned, and each input's gradient summed, in the order
// the plane loops above take, so the same bits.
struct ChannelsLastImage {
  const PoolGeo& g;
  int64_t n;  // the image
  int64_t c() const { return g.in.channels; }
  // Where output (i, j) of channel 0 is in y or dy, whichever layout it has, and the elements
  // between its channels.
  int64_t out_at(int64_t i, int64_t j) const {
    return g.out.base(n * c()) + (i * g.ow + j) * g.out.step();
  }
  int64_t out_channel_step() const { return g.out.last ? 1 : g.oh * g.ow; }
};

// Each channel's window maximum (window_max's, NaN included) or average, for output (i, j).
template <typename T>
void window_last(const PoolDesc& p, const ChannelsLastImage& im, const T* xp, int64_t i, int64_t j,
                 T* y) {
  const PoolGeo& g = im.g;
  const int64_t c = im.c();
  const Window w = window(p, g, i, j);
  thread_local std::vector<float> best, last_nan;
  thread_local std::vector<double> sum;
  if (p.mode == PoolMode::kMax) {
    best.assign(static_cast<size_t>(c), -std::numeric_limits<float>::infinity());
    last_nan.assign(static_cast<size_t>(c), 1.f);  // 1: no NaN seen (a NaN is never 1)
  } else {
    sum.assign(static_cast<size_t>(c), 0.0);
  }
  for (int64_t a = w.ha; a < w.hb; ++a) {
    for (int64_t b = w.wa; b < w.wb; ++b) {
      const T* px = xp + (a * g.w + b) * c;
      if (p.mode != PoolMode::kMax) {
        for (int64_t ch = 0; ch < c; ++ch) sum[ch] += load(px[ch]);
        continue;
      }
      for (int64_t ch = 0; ch < c; ++ch) {
        const float v = load(px[ch]);
        best[ch] = v > best[ch] ? v : best[ch];
        last_nan[ch] = v != v ? v : last_nan[ch];
      }
    }
  }
  const int64_t count = p.mode == PoolMode::kMax ? 1 : avg_divisor(p, g, w.h0, w.w0);
  T* out = y + im.out_at(i, j);
  const int64_t step = im.out_channel_step();
  for (int64_t ch = 0; ch < c; ++ch) {
    const float v = p.mode == PoolMode::kMax
                        ? (last_nan[ch] != last_nan[ch] ? last_nan[ch] : best[ch])
                        : static_cast<float>(sum[ch] / count);
    out[ch * step] = stored<T>(v);
  }
}

template <typename T>
void pool_forward_last(const PoolDesc& p, const PoolGeo& g, const T* x, T* y) {
  parallel_for(g.planes / g.in.channels, 1, [&](int64_t n) {
    const ChannelsLastImage im{g, n};
    const T* xp = x + n * g.h * g.w * im.c();
    for (int64_t i = 0; i < g.oh; ++i) {
      for (int64_t j = 0; j < g.ow; ++j) window_last(p, im, xp, i, j, y);
    }
  });
}

// Output (i, j)'s gradient into each channel's inputs in `sums` (the image's, channels last):
// the window's argmax (window_argmax's: the first maximum, or the last NaN; pool_loops.h scans
// every channel at once), or its share.
template <typename T>
void gradient_last(const PoolDesc& p, const ChannelsLastImage& im, const T* xp, const T* dy,
                   int64_t i, int64_t j, float* sums) {
  const PoolGeo& g = im.g;
  const int64_t c = im.c();
  const Window w = window(p, g, i, j);
  const T* grad = dy + im.out_at(i, j);
  const int64_t step = im.out_channel_step();
  if (p.mode != PoolMode::kMax) {
    const int64_t count = avg_divisor(p, g, w.h0, w.w0);
    for (int64_t a = w.ha; a < w.hb; ++a) {
      for (int64_t b = w.wa; b < w.wb; ++b) {
        float* s = sums + (a * g.w + b) * c;
        for (int64_t ch = 0; ch < c; ++ch) s[ch] += load(grad[ch * step]) / count;
      }
    }
    return;
  }
  thread_local std::vector<float> best;
  thread_local std::vector<int32_t> arg, last_nan;  // pixels of the image: under 2^31
  best.resize(static_cast<size_t>(c));
  arg.resize(static_cast<size_t>(c));
  last_nan.resize(static_cast<size_t>(c));
  pool_loops<T>(host_cpu_isa())
      .window_argmax(xp, g.w, c, w.ha, w.hb, w.wa, w.wb, arg.data(), best.data(), last_nan.data());
  for (int64_t ch = 0; ch < c; ++ch) sums[arg[ch] * c + ch] += load(grad[ch * step]);
}

template <typename T>
void pool_backward_last(const PoolDesc& p, const PoolGeo& g, const T* x, const T* dy, T* dx) {
  const int64_t image = g.h * g.w * g.in.channels;
  parallel_for(g.planes / g.in.channels, 1, [&](int64_t n) {
    const ChannelsLastImage im{g, n};
    thread_local std::vector<float> sums;  // the image's, on this thread
    sums.assign(static_cast<size_t>(image), 0.f);
    for (int64_t i = 0; i < g.oh; ++i) {
      for (int64_t j = 0; j < g.ow; ++j) gradient_last(p, im, x + n * image, dy, i, j, sums.data());
    }
    if constexpr (std::is_same_v<T, float>) {
      std::copy(sums.begin(), sums.end(), dx + n * image);
    } else {
      pointwise_loops<T>(host_cpu_isa()).narrow(sums.data(), dx + n * image, image);
    }
  });
}

// Pooling's forward with x and y stored as T: each output computed in float (an average's sum in
// double) and rounded once on store, the same bits as on f32 copies of them (a maximum is one
// of the inputs, stored again exactly).
template <typename T>
void pool_forward_as(const PoolDesc& p, const PoolGeo& g, const T* x, T* y) {
  if (g.in.last) return pool_forward_last(p, g, x, y);
  const int64_t ys = g.out.step();
  parallel_for(g.planes, 2, [&](int64_t pl) {
    const T* xp = x + g.in.base(pl);
    T* yp = y + g.out.base(pl);
    for (int64_t i = 0; i < g.oh; ++i) {
      for (int64_t j = 0; j < g.ow; ++j) {
        const Window w = window(p, g, i, j);
        T& out = yp[(i * g.ow + j) * ys];
        if (p.mode == PoolMode::kMax) {
          out = stored<T>(window_max(xp, g.w, w.ha, w.hb, w.wa, w.wb));
        } else {
          double s = 0;
          for (int64_t a = w.ha; a < w.hb; ++a)
            for (int64_t b = w.wa; b < w.wb; ++b) s += load(xp[a * g.w + b]);
          const int64_t count = avg_divisor(p, g, w.h0, w.w0);
          out = stored<T>(static_cast<float>(s / count));
        }
      }
    }
  });
}

// One plane's input gradient, summed in f32 into `dp` (contiguous, zeroed here).
template <typename T>
void pool_plane_backward(const PoolDesc& p, const PoolGeo& g, const T* xp, const T* gp, float* dp) {
  std::fill(dp, dp + g.h * g.w, 0.f);
  const int64_t ys = g.out.step();
  for (int64_t i = 0; i < g.oh; ++i) {
    for (int64_t j = 0; j < g.ow; ++j) {
      const Window w = window(p, g, i, j);
      const float grad = load(gp[(i * g.ow + j) * ys]);
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
  if (g.in.last) return pool_backward_last(p, g, x, dy, dx);
  const auto narrow = pointwise_loops<T>(host_cpu_isa()).narrow;
  parallel_for(g.planes, 2, [&](int64_t pl) {
    const T* xp = x + g.in.base(pl);
    const T* gp = dy + g.out.base(pl);
    T* dp = dx + g.in.base(pl);
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
  const bool as_stored = one_float_type({&x_s, &y_s}, "pool");  // first: both allocated
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
  check_f32_data(x, "pool input");
  check_f32_data(y, "pool output");
  pool_forward_as<float>(p, g, x.data<float>(), y.data<float>());
}

void CpuBackend::pool_backward(const PoolDesc& p, const Tensor& x_s, const Tensor& y_s,
                               const Tensor& dy_s, Tensor& dx_s) {
  const bool as_stored = one_float_type({&x_s, &dy_s, &dx_s}, "pool backward");
  if (x_s.layout() != dx_s.layout() || y_s.layout() != dy_s.layout()) {
    throw InvalidArgument("pool backward: a gradient is stored in another layout than its value");
  }
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
  check_f32_data(x, "pool input");
  check_f32_data(dy, "pool output gradient");
  check_f32_data(dx, "pool input gradient");
  pool_backward_as<float>(p, g, x.data<float>(), dy.data<float>(), dx.data<float>());
}

void CpuBackend::adaptive_avg_pool_forward(const Tensor& x_s, Tensor& y_s) {
  F32Views f32(*this);
  const Tensor& x = f32.in(x_s);
  Tensor& y = f32.out(y_s);
  check_f32_data(x, "pool input");
  check_f32_data(y, "pool output");
  const PoolGeo g = pool_geo(x, y);
  const int64_t xs = g.in.step(), ys = g.out.step();
  parallel_for(g.planes, 2, [&](int64_t pl) {
    const float* xp = x.data<float>() + g.in.base(pl);
    float* yp = y.data<float>() + g.out.base(pl);
    for (int64_t i = 0; i < g.oh; ++i) {
      const int64_t ha = bin_start(i, g.h, g.oh), hb = bin_end(i, g.h, g.oh);
      for (int64_t j = 0; j < g.ow; ++j) {
        const int64_t wa = bin_start(j, g.w, g.ow), wb = bin_end(j, g.w, g.ow);
        double s = 0;
        for (int64_t a = ha; a < hb; ++a)
          for (int64_t b = wa; b < wb; ++b) s += xp[(a * g.w + b) * xs];
        yp[(i * g.ow + j) * ys] = static_cast<float>(s / ((hb - ha) * (wb - wa)));
      }
    }
  });
}

void CpuBackend::adaptive_avg_pool_backward(const Tensor& dy_s, Tensor& dx_s) {
  F32Views f32(*this);
  const Tensor& dy = f32.in(dy_s);
  Tensor& dx = f32.out(dx_s);
  check_f32_data(dy, "pool output gradient");
  check_f32_data(dx, "pool input gradient");
  const PoolGeo g = pool_geo(dx, dy);
  const int64_t xs = g.in.step(), ys = g.out.step();
  std::fill(dx.data<float>(), dx.data<float>() + dx.numel(), 0.f);
  parallel_for(g.planes, 2, [&](int64_t pl) {
    const float* gp = dy.data<float>() + g.out.base(pl);
    float* dp = dx.data<float>() + g.in.base(pl);
    for (int64_t i = 0; i < g.oh; ++i) {
      const int64_t ha = bin_start(i, g.h, g.oh), hb = bin_end(i, g.h, g.oh);
      for (int64_t j = 0; j < g.ow; ++j) {
        const int64_t wa = bin_start(j, g.w, g.ow), wb = bin_end(j, g.w, g.ow);
        const float share = gp[(i * g.ow + j) * ys] / static_cast<float>((hb - ha) * (wb - wa));
        for (int64_t a = ha; a < hb; ++a)
          for (int64_t b = wa; b < wb; ++b) dp[(a * g.w + b) * xs] += share;
      }
    }
  });
}

}  // namespace dlb
