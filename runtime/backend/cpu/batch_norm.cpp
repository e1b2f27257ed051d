// Batch normalisation over axis 1 with PyTorch's semantics: biased variance to normalise,
// unbiased variance into the running estimate. Sums accumulate in double, in eight lanes. In
// training, the data (x, y, dy, dx) is read and written as stored (f32, or 16-bit loaded into
// floats and rounded once on store: the same bits as on f32 copies of it); the parameters and
// statistics are f32.
#include <fmt/format.h>

#include <cmath>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/f32_views.h"
#include "runtime/backend/cpu/parallel.h"
#include "runtime/core/error.h"
#include "runtime/core/stored_float.h"

namespace dlb {
namespace {
struct Dims {
  int64_t n, c, inner;
};
// `x` is checked by the caller (check_f32, or stored_as_one for data read as stored).
Dims bn_dims(const Tensor& x, const Tensor& gamma) {
  check_f32(gamma, "batch norm weight");
  Dims d{x.dim(0), x.dim(1), x.numel() / (x.dim(0) * x.dim(1))};
  if (gamma.numel() != d.c) {
    throw InvalidArgument(
        fmt::format("batch norm weight has {} entries for {} channels", gamma.numel(), d.c));
  }
  return d;
}

// Sums in kLanes independent double accumulators, added together in a fixed order at the end: the
// same bits on any thread count, and no chain of dependent additions (one accumulator runs at one
// add per floating-point add latency, and GCC may not reorder the sum to vectorize it).
constexpr int64_t kLanes = 8;
struct LaneSum {
  double lane[kLanes] = {};
  // Adds f(k) for k in [0, n), element k into lane k % kLanes.
  template <typename F>
  void add(int64_t n, F f) {
    int64_t k = 0;
    for (; k + kLanes <= n; k += kLanes) {
      for (int64_t j = 0; j < kLanes; ++j) lane[j] += f(k + j);
    }
    for (int64_t j = 0; k < n; ++k, ++j) lane[j] += f(k);
  }
  double total() const {
    double pairs[kLanes / 2];
    for (int64_t j = 0; j < kLanes / 2; ++j) pairs[j] = lane[j] + lane[j + kLanes / 2];
    return (pairs[0] + pairs[2]) + (pairs[1] + pairs[3]);
  }
};
static_assert(kLanes == 8, "total() adds eight lanes");

// Training statistics and y = x * scale + shift per channel, then max(y, 0) when `relu` (NaN and
// -0 pass, as relu_forward's), with x and y stored as T.
template <typename T>
void bn_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
              Tensor& running_var, Tensor& save_mean, Tensor& save_invstd, Tensor& y,
              float momentum, float eps, bool relu) {
  const Dims d = bn_dims(x, gamma);
  const int64_t m = d.n * d.inner;
  if (m < 2) {
    throw InvalidArgument(
        fmt::format("batch norm in training needs more than one value per channel (got input {})",
                    x.shape().str()));
  }
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  parallel_for(d.c, 2, [&](int64_t c) {
    LaneSum sum;
    for (int64_t i = 0; i < d.n; ++i) {
      const T* row = xp + (i * d.c + c) * d.inner;
      sum.add(d.inner, [row](int64_t k) { return static_cast<double>(load(row[k])); });
    }
    const double mean = sum.total() / m;
    LaneSum sq;
    for (int64_t i = 0; i < d.n; ++i) {
      const T* row = xp + (i * d.c + c) * d.inner;
      sq.add(d.inner, [row, mean](int64_t k) {
        const double v = load(row[k]);
        return (v - mean) * (v - mean);
      });
    }
    const double var = sq.total() / m;
    const double invstd = 1.0 / std::sqrt(var + eps);
    save_mean.data<float>()[c] = static_cast<float>(mean);
    save_invstd.data<float>()[c] = static_cast<float>(invstd);
    float& rm = running_mean.data<float>()[c];
    float& rv = running_var.data<float>()[c];
    rm = static_cast<float>((1 - momentum) * rm + momentum * mean);
    rv = static_cast<float>((1 - momentum) * rv + momentum * var * m / (m - 1));
    const float scale = static_cast<float>(gamma.data<float>()[c] * invstd);
    const float shift = static_cast<float>(beta.data<float>()[c] - mean * scale);
    const float floor = relu ? 0.f : -INFINITY;  // -inf: no ReLU (NaN and -0 pass either way)
    for (int64_t i = 0; i < d.n; ++i) {
      const T* row = xp + (i * d.c + c) * d.inner;
      T* out = yp + (i * d.c + c) * d.inner;
      for (int64_t k = 0; k < d.inner; ++k) {
        const float v = load(row[k]) * scale + shift;
        out[k] = stored<T>(v < floor ? 0.f : v);
      }
    }
  });
}

// Batch norm's backward of dy, channel `c`'s part, with x, dy and dx stored as T. dx may be dy.
template <typename T>
void bn_backward_channel(const Dims& d, int64_t c, const T* x, const T* dy, const float* gamma,
                         double mean, double invstd, T* dx, float* dgamma, float* dbeta) {
  const int64_t m = d.n * d.inner;
  const auto at = [&](int64_t i) { return (i * d.c + c) * d.inner; };
  LaneSum dy_sum, dy_xhat_sum;
  for (int64_t i = 0; i < d.n; ++i) {
    const T* xr = x + at(i);
    const T* gr = dy + at(i);
    dy_sum.add(d.inner, [gr](int64_t k) { return static_cast<double>(load(gr[k])); });
    dy_xhat_sum.add(d.inner,
                    [=](int64_t k) { return load(gr[k]) * (load(xr[k]) - mean) * invstd; });
  }
  const double sum_dy = dy_sum.total(), sum_dy_xhat = dy_xhat_sum.total();
  dgamma[c] = static_cast<float>(sum_dy_xhat);
  dbeta[c] = static_cast<float>(sum_dy);
  const double k1 = gamma[c] * invstd;
  const double mean_dy = sum_dy / m, mean_dy_xhat = sum_dy_xhat / m;
  for (int64_t i = 0; i < d.n; ++i) {
    const T* xr = x + at(i);
    const T* gr = dy + at(i);
    T* out = dx + at(i);
    for (int64_t k = 0; k < d.inner; ++k) {
      const double xhat = (load(xr[k]) - mean) * invstd;
      out[k] = stored<T>(static_cast<float>(k1 * (load(gr[k]) - mean_dy - xhat * mean_dy_xhat)));
    }
  }
}

// Batch norm's backward of dy, or with `y` (the fused pair's output) of dy where y > 0 (NaN
// included, as relu_backward's mask): per channel, the masked gradient into dx first, then
// batch norm's backward from dx into dx, while the channel's rows are in cache. The same bits as
// relu_backward then batch_norm_backward. x, y, dy and dx stored as T; dx may be dy.
template <typename T>
void bn_backward(const Tensor& x, const Tensor* y, const Tensor& dy, const Tensor& gamma,
                 const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx, Tensor& dgamma,
                 Tensor& dbeta) {
  const Dims d = bn_dims(x, gamma);
  const T* grad = dy.data<T>();
  T* out = dx.data<T>();
  parallel_for(d.c, 2, [&](int64_t c) {
    if (y) {
      for (int64_t i = 0; i < d.n; ++i) {
        const int64_t row = (i * d.c + c) * d.inner;
        const T* yr = y->data<T>() + row;
        const T* gr = grad + row;
        T* o = out + row;
        for (int64_t k = 0; k < d.inner; ++k) {
          const T g = gr[k];  // loaded whatever the mask, as relu_backward's (vectorized)
          o[k] = load(yr[k]) <= 0.f ? stored<T>(0.f) : g;
        }
      }
    }
    bn_backward_channel<T>(d, c, x.data<T>(), y ? out : grad, gamma.data<float>(),
                           save_mean.data<float>()[c], save_invstd.data<float>()[c], out,
                           dgamma.data<float>(), dbeta.data<float>());
  });
}

// Batch norm in training (`relu`: with its ReLU) on the data as stored where x and y share one
// float type, else on f32 views of them.
void train(CpuBackend& be, const Tensor& x, const Tensor& gamma, const Tensor& beta,
           Tensor& running_mean, Tensor& running_var, Tensor& save_mean, Tensor& save_invstd,
           Tensor& y, float momentum, float eps, bool relu) {
  check_same_shape(x, y, "batch norm");
  F32Views f32(be);
  const Tensor& g = f32.in(gamma);
  const Tensor& b = f32.in(beta);
  Tensor& rm = f32.inout(running_mean);
  Tensor& rv = f32.inout(running_var);
  Tensor& sm = f32.out(save_mean);
  Tensor& si = f32.out(save_invstd);
  if (stored_as_one({&x, &y}, "batch norm")) {
    with_stored_float(x.dtype(), "batch norm input", [&](auto t) {
      bn_train<decltype(t)>(x, g, b, rm, rv, sm, si, y, momentum, eps, relu);
    });
    return;
  }
  const Tensor& xf = f32.in(x);
  Tensor& yf = f32.out(y);
  check_f32(xf, "batch norm input");
  check_f32(yf, "batch norm output");
  bn_train<float>(xf, g, b, rm, rv, sm, si, yf, momentum, eps, relu);
}

// Batch norm's backward (with `y`: of the pair with its ReLU) on the data as stored where x, y,
// dy and dx share one float type, else on f32 views of them.
void backward(CpuBackend& be, const Tensor& x, const Tensor* y, const Tensor& dy,
              const Tensor& gamma, const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx,
              Tensor& dgamma, Tensor& dbeta) {
  F32Views f32(be);
  const Tensor& g = f32.in(gamma);
  const Tensor& sm = f32.in(save_mean);
  const Tensor& si = f32.in(save_invstd);
  Tensor& dg = f32.out(dgamma);
  Tensor& db = f32.out(dbeta);
  if (stored_as_one({&x, y ? y : &x, &dy, &dx}, "batch norm backward")) {
    with_stored_float(x.dtype(), "batch norm input",
                      [&](auto t) { bn_backward<decltype(t)>(x, y, dy, g, sm, si, dx, dg, db); });
    return;
  }
  const Tensor& xf = f32.in(x);
  const Tensor* yf = y ? &f32.in(*y) : nullptr;
  const Tensor& dyf = f32.in(dy);
  Tensor& dxf = f32.out(dx);
  for (const Tensor* t : {&xf, yf ? yf : &xf, &dyf, static_cast<const Tensor*>(&dxf)}) {
    check_f32(*t, "batch norm backward operand");
  }
  bn_backward<float>(xf, yf, dyf, g, sm, si, dxf, dg, db);
}

}  // namespace

void CpuBackend::batch_norm_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  Tensor& running_mean, Tensor& running_var, Tensor& save_mean,
                                  Tensor& save_invstd, Tensor& y, float momentum, float eps) {
  train(*this, x, gamma, beta, running_mean, running_var, save_mean, save_invstd, y, momentum, eps,
        false);
}

// The pair in one pass over the output: the same values as batch_norm_train then relu_forward,
// but for the sign of a zero in 16 bits (a negative value that rounds to -0 is -0 after the
// ReLU there, and +0 here, where the ReLU precedes the rounding).
void CpuBackend::batch_norm_relu_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                       Tensor& running_mean, Tensor& running_var, Tensor& save_mean,
                                       Tensor& save_invstd, Tensor& y, float momentum, float eps) {
  train(*this, x, gamma, beta, running_mean, running_var, save_mean, save_invstd, y, momentum, eps,
        true);
}

void CpuBackend::batch_norm_infer(const Tensor& x_s, const Tensor& gamma_s, const Tensor& beta_s,
                                  const Tensor& running_mean_s, const Tensor& running_var_s,
                                  Tensor& y_s, float eps) {
  F32Views f32(*this);
  const Tensor& x = f32.in(x_s);
  const Tensor& gamma = f32.in(gamma_s);
  const Tensor& beta = f32.in(beta_s);
  const Tensor& running_mean = f32.in(running_mean_s);
  const Tensor& running_var = f32.in(running_var_s);
  Tensor& y = f32.out(y_s);
  check_f32(x, "batch norm input");
  const Dims d = bn_dims(x, gamma);
  parallel_for(d.c, 2, [&](int64_t c) {
    const float invstd = 1.f / std::sqrt(running_var.data<float>()[c] + eps);
    const float scale = gamma.data<float>()[c] * invstd;
    const float shift = beta.data<float>()[c] - running_mean.data<float>()[c] * scale;
    for (int64_t i = 0; i < d.n; ++i) {
      const float* row = x.data<float>() + (i * d.c + c) * d.inner;
      float* out = y.data<float>() + (i * d.c + c) * d.inner;
      for (int64_t k = 0; k < d.inner; ++k) out[k] = row[k] * scale + shift;
    }
  });
}

void CpuBackend::batch_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                     const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx,
                                     Tensor& dgamma, Tensor& dbeta) {
  check_same_shape(x, dy, "batch norm backward");
  check_same_shape(x, dx, "batch norm backward");
  backward(*this, x, nullptr, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
}

// The pair's backward in one pass: the same bits as relu_backward then batch_norm_backward.
void CpuBackend::batch_norm_relu_backward(const Tensor& x, const Tensor& y, const Tensor& dy,
                                          const Tensor& gamma, const Tensor& save_mean,
                                          const Tensor& save_invstd, Tensor& dx, Tensor& dgamma,
                                          Tensor& dbeta) {
  for (const Tensor* t : {&y, &dy, static_cast<const Tensor*>(&dx)}) {
    check_same_shape(x, *t, "batch norm + relu backward");
  }
  backward(*this, x, &y, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
}

}  // namespace dlb
