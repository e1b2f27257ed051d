// The float64 references of ReLU, pooling, the elementwise products and sums. Max pooling follows
// PyTorch's max_pool2d: a window's first maximum in scan order takes the gradient, and a NaN
// takes the window (the last NaN). A gradient element that several windows send to is a sum.
#include <algorithm>
#include <cmath>
#include <functional>

#include "runtime/check/bounds.h"
#include "runtime/check/reference.h"

namespace dlb {
namespace {

struct Planes {
  int64_t planes, h, w, oh, ow;
};

// Window (i, j) of a pooling, clipped to the input.
struct Window {
  int64_t ha, hb, wa, wb, divisor;
};
Window pool_window(const PoolDesc& p, const Planes& g, int64_t i, int64_t j) {
  const int64_t h0 = i * p.stride_h - p.pad_h, w0 = j * p.stride_w - p.pad_w;
  Window win{std::max<int64_t>(h0, 0), std::min(h0 + p.kernel_h, g.h), std::max<int64_t>(w0, 0),
             std::min(w0 + p.kernel_w, g.w), 0};
  // count_include_pad (PyTorch's default) divides by the window clipped to the padded input.
  win.divisor = p.count_include_pad ? (std::min(h0 + p.kernel_h, g.h + p.pad_h) - h0) *
                                          (std::min(w0 + p.kernel_w, g.w + p.pad_w) - w0)
                                    : (win.hb - win.ha) * (win.wb - win.wa);
  return win;
}

// torch's adaptive bins: [floor(i·in/out), ceil((i+1)·in/out)).
Window adaptive_window(const Planes& g, int64_t i, int64_t j) {
  Window win{(i * g.h) / g.oh, ((i + 1) * g.h + g.oh - 1) / g.oh, (j * g.w) / g.ow,
             ((j + 1) * g.w + g.ow - 1) / g.ow, 0};
  win.divisor = (win.hb - win.ha) * (win.wb - win.wa);
  return win;
}

int64_t argmax(const double* x, const Planes& g, const Window& win) {
  int64_t best = win.ha * g.w + win.wa, last_nan = -1;
  for (int64_t a = win.ha; a < win.hb; ++a) {
    for (int64_t b = win.wa; b < win.wb; ++b) {
      const int64_t at = a * g.w + b;
      if (std::isnan(x[at])) last_nan = at;
      if (x[at] > x[best]) best = at;
    }
  }
  return last_nan >= 0 ? last_nan : best;
}

// Sums of contributions scattered into an input-sized gradient: their count and magnitude per
// element make each element's bound.
struct Scatter {
  Expected e;
  std::vector<int64_t> count;
  explicit Scatter(const Shape& s) : e(s), count(static_cast<size_t>(s.numel()), 0) {}
  void add(size_t at, double v) { e.want.v[at] += v, e.bound[at] += std::fabs(v), ++count[at]; }
  // One contribution is exact; more are a sum in f32. `each` is the rounding of each
  // contribution (a division), relative.
  Expected finish(double u, double each) {
    for (size_t i = 0; i < count.size(); ++i) {
      const double magnitude = e.bound[i];
      e.bound[i] =
          count[i] > 1 ? reduction_bound(static_cast<double>(count[i]), magnitude, u, 0, 0) : 0.0;
      e.bound[i] += each * magnitude;
    }
    return std::move(e);
  }
};

Expected pool_forward(const HostArray& x, const Shape& out, bool max,
                      const std::function<Window(const Planes&, int64_t, int64_t)>& window,
                      const Arithmetic& a) {
  const Planes g{x.shape[0] * x.shape[1], x.shape[2], x.shape[3], out[2], out[3]};
  Expected e(out);
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    const double* xp = x.v.data() + pl * g.h * g.w;
    for (int64_t i = 0; i < g.oh; ++i) {
      for (int64_t j = 0; j < g.ow; ++j) {
        const Window win = window(g, i, j);
        const size_t at = static_cast<size_t>((pl * g.oh + i) * g.ow + j);
        if (max) {
          e.want.v[at] = xp[argmax(xp, g, win)];
          continue;  // a maximum is one of the inputs: exact
        }
        double sum = 0, magnitude = 0;
        for (int64_t r = win.ha; r < win.hb; ++r)
          for (int64_t c = win.wa; c < win.wb; ++c)
            sum += xp[r * g.w + c], magnitude += std::fabs(xp[r * g.w + c]);
        const double k = static_cast<double>((win.hb - win.ha) * (win.wb - win.wa));
        e.want.v[at] = sum / win.divisor;
        e.bound[at] = reduction_bound(k, magnitude / win.divisor, a.ops, 0, 0) +
                      kUlps * a.ops * std::fabs(e.want.v[at]);
      }
    }
  }
  return e;
}

}  // namespace

Expected ref_relu_forward(const HostArray& x) {
  Expected e(x.shape);
  for (size_t i = 0; i < x.v.size(); ++i) e.want.v[i] = x.v[i] > 0 ? x.v[i] : 0.0;
  return e;
}

Expected ref_relu_backward(const HostArray& y, const HostArray& dy) {
  Expected e(dy.shape);
  for (size_t i = 0; i < dy.v.size(); ++i) e.want.v[i] = y.v[i] > 0 ? dy.v[i] : 0.0;
  return e;
}

Expected ref_pool_forward(const PoolDesc& p, const HostArray& x, const Shape& out,
                          const Arithmetic& a) {
  return pool_forward(
      x, out, p.mode == PoolMode::kMax,
      [&](const Planes& g, int64_t i, int64_t j) { return pool_window(p, g, i, j); }, a);
}

Expected ref_pool_backward(const PoolDesc& p, const HostArray& x, const HostArray& dy,
                           const Arithmetic& a) {
  const Planes g{x.shape[0] * x.shape[1], x.shape[2], x.shape[3], dy.shape[2], dy.shape[3]};
  Scatter s(x.shape);
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    const double* xp = x.v.data() + pl * g.h * g.w;
    const size_t base = static_cast<size_t>(pl * g.h * g.w);
    for (int64_t i = 0; i < g.oh; ++i) {
      for (int64_t j = 0; j < g.ow; ++j) {
        const Window win = pool_window(p, g, i, j);
        const double grad = dy.v[static_cast<size_t>((pl * g.oh + i) * g.ow + j)];
        if (p.mode == PoolMode::kMax) {
          s.add(base + static_cast<size_t>(argmax(xp, g, win)), grad);
          continue;
        }
        for (int64_t r = win.ha; r < win.hb; ++r)
          for (int64_t c = win.wa; c < win.wb; ++c) s.add(base + r * g.w + c, grad / win.divisor);
      }
    }
  }
  return s.finish(a.ops, p.mode == PoolMode::kMax ? 0.0 : kUlps * a.ops);
}

Expected ref_adaptive_avg_pool_forward(const HostArray& x, int64_t out_h, int64_t out_w,
                                       const Arithmetic& a) {
  return pool_forward(x, Shape{x.shape[0], x.shape[1], out_h, out_w}, false, adaptive_window, a);
}

Expected ref_adaptive_avg_pool_backward(const HostArray& dy, const Shape& in, const Arithmetic& a) {
  const Planes g{in[0] * in[1], in[2], in[3], dy.shape[2], dy.shape[3]};
  Scatter s(in);
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    const size_t base = static_cast<size_t>(pl * g.h * g.w);
    for (int64_t i = 0; i < g.oh; ++i) {
      for (int64_t j = 0; j < g.ow; ++j) {
        const Window win = adaptive_window(g, i, j);
        const double share = dy.v[static_cast<size_t>((pl * g.oh + i) * g.ow + j)] / win.divisor;
        for (int64_t r = win.ha; r < win.hb; ++r)
          for (int64_t c = win.wa; c < win.wb; ++c) s.add(base + r * g.w + c, share);
      }
    }
  }
  return s.finish(a.ops, kUlps * a.ops);
}

Expected ref_multiply(const HostArray& x, const HostArray& mask, const Arithmetic& a) {
  Expected e(x.shape);
  for (size_t i = 0; i < x.v.size(); ++i) {
    e.want.v[i] = x.v[i] * mask.v[i];
    e.bound[i] = elementwise_bound(std::fabs(e.want.v[i]), a.ops, 0, 0);
  }
  return e;
}

Expected ref_add(const HostArray& x, const HostArray& y, const Arithmetic& a) {
  Expected e(x.shape);
  for (size_t i = 0; i < x.v.size(); ++i) {
    e.want.v[i] = x.v[i] + y.v[i];
    e.bound[i] = elementwise_bound(std::fabs(x.v[i]) + std::fabs(y.v[i]), a.ops, 0, 0);
  }
  return e;
}

}  // namespace dlb
