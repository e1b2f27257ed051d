// Batch normalisation over axis 1 with PyTorch's semantics: biased variance to normalise,
// unbiased variance into the running estimate. Sums accumulate in double, in eight lanes.
#include <fmt/format.h>

#include <cmath>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/f32_views.h"
#include "runtime/backend/cpu/parallel.h"
#include "runtime/core/error.h"

namespace dlb {
namespace {
struct Dims {
  int64_t n, c, inner;
};
Dims bn_dims(const Tensor& x, const Tensor& gamma) {
  check_f32(x, "batch norm input");
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
// -0 pass, as relu_forward's), on f32 tensors.
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
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  parallel_for(d.c, 2, [&](int64_t c) {
    LaneSum sum;
    for (int64_t i = 0; i < d.n; ++i) {
      const float* row = xp + (i * d.c + c) * d.inner;
      sum.add(d.inner, [row](int64_t k) { return static_cast<double>(row[k]); });
    }
    const double mean = sum.total() / m;
    LaneSum sq;
    for (int64_t i = 0; i < d.n; ++i) {
      const float* row = xp + (i * d.c + c) * d.inner;
      sq.add(d.inner, [row, mean](int64_t k) { return (row[k] - mean) * (row[k] - mean); });
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
    for (int64_t i = 0; i < d.n; ++i) {
      const float* row = xp + (i * d.c + c) * d.inner;
      float* out = yp + (i * d.c + c) * d.inner;
      for (int64_t k = 0; k < d.inner; ++k) out[k] = row[k] * scale + shift;
      if (!relu) continue;
      for (int64_t k = 0; k < d.inner; ++k) out[k] = out[k] < 0.f ? 0.f : out[k];
    }
  });
}

// Batch norm's backward of dy on f32 tensors, channel `c`'s part. dx may be dy.
void bn_backward_channel(const Dims& d, int64_t c, const float* x, const float* dy,
                         const float* gamma, double mean, double invstd, float* dx, float* dgamma,
                         float* dbeta) {
  const int64_t m = d.n * d.inner;
  const auto at = [&](int64_t i) { return (i * d.c + c) * d.inner; };
  LaneSum dy_sum, dy_xhat_sum;
  for (int64_t i = 0; i < d.n; ++i) {
    const float* xr = x + at(i);
    const float* gr = dy + at(i);
    dy_sum.add(d.inner, [gr](int64_t k) { return static_cast<double>(gr[k]); });
    dy_xhat_sum.add(d.inner, [=](int64_t k) { return gr[k] * (xr[k] - mean) * invstd; });
  }
  const double sum_dy = dy_sum.total(), sum_dy_xhat = dy_xhat_sum.total();
  dgamma[c] = static_cast<float>(sum_dy_xhat);
  dbeta[c] = static_cast<float>(sum_dy);
  const double k1 = gamma[c] * invstd;
  const double mean_dy = sum_dy / m, mean_dy_xhat = sum_dy_xhat / m;
  for (int64_t i = 0; i < d.n; ++i) {
    const float* xr = x + at(i);
    const float* gr = dy + at(i);
    float* out = dx + at(i);
    for (int64_t k = 0; k < d.inner; ++k) {
      const double xhat = (xr[k] - mean) * invstd;
      out[k] = static_cast<float>(k1 * (gr[k] - mean_dy - xhat * mean_dy_xhat));
    }
  }
}

// Batch norm's backward of dy, or with `y` (the fused pair's output) of dy where y > 0 (NaN
// included, as relu_backward's mask): per channel, the masked gradient into dx first, then
// batch norm's backward from dx into dx, while the channel's rows are in cache. The same bits as
// relu_backward then batch_norm_backward. On f32 tensors; dx may be dy.
void bn_backward(const Tensor& x, const Tensor* y, const Tensor& dy, const Tensor& gamma,
                 const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx, Tensor& dgamma,
                 Tensor& dbeta) {
  const Dims d = bn_dims(x, gamma);
  const float* grad = dy.data<float>();
  float* out = dx.data<float>();
  parallel_for(d.c, 2, [&](int64_t c) {
    if (y) {
      for (int64_t i = 0; i < d.n; ++i) {
        const int64_t row = (i * d.c + c) * d.inner;
        const float* yr = y->data<float>() + row;
        const float* gr = grad + row;
        float* o = out + row;
        for (int64_t k = 0; k < d.inner; ++k) {
          const float g = gr[k];  // loaded whatever the mask, as relu_backward's (vectorized)
          o[k] = yr[k] <= 0.f ? 0.f : g;
        }
      }
    }
    bn_backward_channel(d, c, x.data<float>(), y ? out : grad, gamma.data<float>(),
                        save_mean.data<float>()[c], save_invstd.data<float>()[c], out,
                        dgamma.data<float>(), dbeta.data<float>());
  });
}

}  // namespace

void CpuBackend::batch_norm_train(const Tensor& x_s, const Tensor& gamma_s, const Tensor& beta_s,
                                  Tensor& running_mean_s, Tensor& running_var_s,
                                  Tensor& save_mean_s, Tensor& save_invstd_s, Tensor& y_s,
                                  float momentum, float eps) {
  F32Views f32(*this);
  bn_train(f32.in(x_s), f32.in(gamma_s), f32.in(beta_s), f32.inout(running_mean_s),
           f32.inout(running_var_s), f32.out(save_mean_s), f32.out(save_invstd_s), f32.out(y_s),
           momentum, eps, false);
}

// The pair in one pass over the output: the same values as batch_norm_train then relu_forward,
// but for the sign of a zero in 16 bits (a negative value that rounds to -0 is -0 after the
// ReLU there, and +0 here, where the ReLU precedes the rounding).
void CpuBackend::batch_norm_relu_train(const Tensor& x_s, const Tensor& gamma_s,
                                       const Tensor& beta_s, Tensor& running_mean_s,
                                       Tensor& running_var_s, Tensor& save_mean_s,
                                       Tensor& save_invstd_s, Tensor& y_s, float momentum,
                                       float eps) {
  F32Views f32(*this);
  bn_train(f32.in(x_s), f32.in(gamma_s), f32.in(beta_s), f32.inout(running_mean_s),
           f32.inout(running_var_s), f32.out(save_mean_s), f32.out(save_invstd_s), f32.out(y_s),
           momentum, eps, true);
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

void CpuBackend::batch_norm_backward(const Tensor& x_s, const Tensor& dy_s, const Tensor& gamma_s,
                                     const Tensor& save_mean_s, const Tensor& save_invstd_s,
                                     Tensor& dx_s, Tensor& dgamma_s, Tensor& dbeta_s) {
  check_same_shape(x_s, dy_s, "batch norm backward");
  check_same_shape(x_s, dx_s, "batch norm backward");
  F32Views f32(*this);
  bn_backward(f32.in(x_s), nullptr, f32.in(dy_s), f32.in(gamma_s), f32.in(save_mean_s),
              f32.in(save_invstd_s), f32.out(dx_s), f32.out(dgamma_s), f32.out(dbeta_s));
}

// The pair's backward in one pass: the same bits as relu_backward then batch_norm_backward.
void CpuBackend::batch_norm_relu_backward(const Tensor& x_s, const Tensor& y_s, const Tensor& dy_s,
                                          const Tensor& gamma_s, const Tensor& save_mean_s,
                                          const Tensor& save_invstd_s, Tensor& dx_s,
                                          Tensor& dgamma_s, Tensor& dbeta_s) {
  for (const Tensor* t : {&y_s, &dy_s, static_cast<const Tensor*>(&dx_s)}) {
    check_same_shape(x_s, *t, "batch norm + relu backward");
  }
  F32Views f32(*this);
  const Tensor& y = f32.in(y_s);
  bn_backward(f32.in(x_s), &y, f32.in(dy_s), f32.in(gamma_s), f32.in(save_mean_s),
              f32.in(save_invstd_s), f32.out(dx_s), f32.out(dgamma_s), f32.out(dbeta_s));
}

}  // namespace dlb
