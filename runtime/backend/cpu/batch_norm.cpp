// Batch normalisation over axis 1 with PyTorch's semantics: biased variance to normalise,
// unbiased variance into the running estimate. NCHW or channels last (the same bits). Sums
// accumulate in double, in eight lanes (batch_norm_loops.h, compiled for this CPU's widest
// instruction set, the same bits). In training, the data (x, y, dy, dx) is read and written as
// stored (f32, or 16-bit loaded into floats and rounded once on store: the same bits as on f32
// copies of it); the parameters and statistics are f32.
#include <fmt/format.h>

#include <cmath>

#include "runtime/backend/cpu/batch_norm_loops.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/f32_views.h"
#include "runtime/backend/cpu/parallel.h"
#include "runtime/core/error.h"
#include "runtime/core/stored_float.h"

namespace dlb {
namespace {
// f(c) for each channel (NCHW), or f(c0, c1) for ranges of them (channels last: each loop reads
// whole rows of its channels), over the pool's threads.
template <typename OneChannel, typename Channels>
void over_channels(const Tensor& x, int64_t channels, OneChannel one, Channels range) {
  if (x.layout() == Layout::kNHWC) {
    return parallel_blocks(channels, 2, [&](int64_t c0, int64_t c1) {
      if (c0 < c1) range(c0, c1);
    });
  }
  parallel_for(channels, 2, one);
}

// `x` is checked by the caller (check_f32, or stored_as_one for data read as stored).
BnDims bn_dims(const Tensor& x, const Tensor& gamma) {
  check_f32(gamma, "batch norm weight");
  BnDims d{x.dim(0), x.dim(1), x.numel() / (x.dim(0) * x.dim(1))};
  if (gamma.numel() != d.c) {
    throw InvalidArgument(
        fmt::format("batch norm weight has {} entries for {} channels", gamma.numel(), d.c));
  }
  return d;
}

// Training statistics and y = x * scale + shift per channel (then max(y, 0) when `relu`), with
// x and y stored as T, on the backend's loops (batch_norm_loops.h).
template <typename T>
void bn_train(CpuIsa isa, const Tensor& x, const Tensor& gamma, const Tensor& beta,
              Tensor& running_mean, Tensor& running_var, Tensor& save_mean, Tensor& save_invstd,
              Tensor& y, float momentum, float eps, bool relu) {
  const BnDims d = bn_dims(x, gamma);
  if (d.n * d.inner < 2) {
    throw InvalidArgument(
        fmt::format("batch norm in training needs more than one value per channel (got input {})",
                    x.shape().str()));
  }
  const BnTrainArgs<T> a{d,
                         x.data<T>(),
                         y.data<T>(),
                         gamma.data<float>(),
                         beta.data<float>(),
                         running_mean.data<float>(),
                         running_var.data<float>(),
                         save_mean.data<float>(),
                         save_invstd.data<float>(),
                         momentum,
                         eps,
                         relu};
  const BnLoops<T>& loops = bn_loops<T>(isa);
  over_channels(
      x, d.c, [&](int64_t c) { loops.train(a, c); },
      [&](int64_t c0, int64_t c1) { loops.train_channels_last(a, c0, c1); });
}

// Batch norm's backward of dy, or with `y` (the fused pair's output) of dy where y > 0: the same
// bits as relu_backward then batch_norm_backward. x, y, dy and dx stored as T; dx may be dy.
template <typename T>
void bn_backward(CpuIsa isa, const Tensor& x, const Tensor* y, const Tensor& dy,
                 const Tensor& gamma, const Tensor& save_mean, const Tensor& save_invstd,
                 Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  const BnBackwardArgs<T> a{bn_dims(x, gamma),
                            x.data<T>(),
                            y ? y->data<T>() : nullptr,
                            dy.data<T>(),
                            dx.data<T>(),
                            gamma.data<float>(),
                            save_mean.data<float>(),
                            save_invstd.data<float>(),
                            dgamma.data<float>(),
                            dbeta.data<float>()};
  const BnLoops<T>& loops = bn_loops<T>(isa);
  over_channels(
      x, a.d.c, [&](int64_t c) { loops.backward(a, c); },
      [&](int64_t c0, int64_t c1) { loops.backward_channels_last(a, c0, c1); });
}

// Batch norm in training (`relu`: with its ReLU) on the data as stored where x and y share one
// float type, else on f32 views of them.
void train(CpuBackend& be, const Tensor& x_in, const Tensor& gamma, const Tensor& beta,
           Tensor& running_mean, Tensor& running_var, Tensor& save_mean, Tensor& save_invstd,
           Tensor& y, float momentum, float eps, bool relu) {
  check_same_shape(x_in, y, "batch norm");
  LayoutViews as_y(be, y.layout());
  const Tensor& x = as_y.in(x_in);
  F32Views f32(be);
  const Tensor& g = f32.in(gamma);
  const Tensor& b = f32.in(beta);
  Tensor& rm = f32.inout(running_mean);
  Tensor& rv = f32.inout(running_var);
  Tensor& sm = f32.out(save_mean);
  Tensor& si = f32.out(save_invstd);
  if (stored_as_one({&x, &y}, "batch norm")) {
    with_stored_float(x.dtype(), "batch norm input", [&](auto t) {
      bn_train<decltype(t)>(host_cpu_isa(), x, g, b, rm, rv, sm, si, y, momentum, eps, relu);
    });
    return;
  }
  const Tensor& xf = f32.in(x);
  Tensor& yf = f32.out(y);
  check_f32(xf, "batch norm input");
  check_f32(yf, "batch norm output");
  bn_train<float>(host_cpu_isa(), xf, g, b, rm, rv, sm, si, yf, momentum, eps, relu);
}

// Batch norm's backward (with `y`: of the pair with its ReLU) on the data as stored where x, y,
// dy and dx share one float type, else on f32 views of them.
void backward(CpuBackend& be, const Tensor& x_in, const Tensor* y_in, const Tensor& dy_in,
              const Tensor& gamma, const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx,
              Tensor& dgamma, Tensor& dbeta) {
  LayoutViews as_dx(be, dx.layout());
  const Tensor& x = as_dx.in(x_in);
  const Tensor& dy = as_dx.in(dy_in);
  const Tensor* y = y_in ? &as_dx.in(*y_in) : nullptr;
  F32Views f32(be);
  const Tensor& g = f32.in(gamma);
  const Tensor& sm = f32.in(save_mean);
  const Tensor& si = f32.in(save_invstd);
  Tensor& dg = f32.out(dgamma);
  Tensor& db = f32.out(dbeta);
  if (stored_as_one({&x, y ? y : &x, &dy, &dx}, "batch norm backward")) {
    with_stored_float(x.dtype(), "batch norm input", [&](auto t) {
      bn_backward<decltype(t)>(host_cpu_isa(), x, y, dy, g, sm, si, dx, dg, db);
    });
    return;
  }
  const Tensor& xf = f32.in(x);
  const Tensor* yf = y ? &f32.in(*y) : nullptr;
  const Tensor& dyf = f32.in(dy);
  Tensor& dxf = f32.out(dx);
  for (const Tensor* t : {&xf, yf ? yf : &xf, &dyf, static_cast<const Tensor*>(&dxf)}) {
    check_f32(*t, "batch norm backward operand");
  }
  bn_backward<float>(host_cpu_isa(), xf, yf, dyf, g, sm, si, dxf, dg, db);
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

// On the data as stored where x and y share one float type (each element loaded into a float,
// one rounding on store: the bits of f32 copies), else on f32 views of them.
void CpuBackend::batch_norm_infer(const Tensor& x_in, const Tensor& gamma_s, const Tensor& beta_s,
                                  const Tensor& running_mean_s, const Tensor& running_var_s,
                                  Tensor& y_s, float eps) {
  check_same_shape(x_in, y_s, "batch norm");
  LayoutViews as_y(*this, y_s.layout());
  const Tensor& x_s = as_y.in(x_in);
  F32Views f32(*this);
  const Tensor& gamma = f32.in(gamma_s);
  const auto run = [&](auto t, const Tensor& x, Tensor& y) {
    using T = decltype(t);
    const BnInferArgs<T> a{bn_dims(x, gamma),
                           x.data<T>(),
                           y.data<T>(),
                           gamma.data<float>(),
                           f32.in(beta_s).data<float>(),
                           f32.in(running_mean_s).data<float>(),
                           f32.in(running_var_s).data<float>(),
                           eps};
    const BnLoops<T>& loops = bn_loops<T>(host_cpu_isa());
    over_channels(
        x, a.d.c, [&](int64_t c) { loops.infer(a, c); },
        [&](int64_t c0, int64_t c1) { loops.infer_channels_last(a, c0, c1); });
  };
  if (stored_as_one({&x_s, &y_s}, "batch norm")) {
    with_stored_float(x_s.dtype(), "batch norm input", [&](auto t) { run(t, x_s, y_s); });
    return;
  }
  const Tensor& x = f32.in(x_s);
  Tensor& y = f32.out(y_s);
  check_f32(x, "batch norm input");
  check_f32(y, "batch norm output");
  run(float{}, x, y);
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
