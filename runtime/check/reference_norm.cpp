// The float64 batch-norm reference (PyTorch's batch_norm: biased variance to normalise, the
// unbiased one into the running estimate) and its bounds. A channel's K = N·H·W values give the
// statistics by reductions of K terms; the bounds carry their errors into each output to first
// order. The variance's bound allows for the one-pass formula E[x²] - μ² as well as two passes.
#include <cmath>

#include "runtime/check/bounds.h"
#include "runtime/check/reference.h"

namespace dlb {
namespace {

struct Channels {
  int64_t n, c, inner;
  int64_t count() const { return n * inner; }
  size_t at(int64_t i, int64_t ch, int64_t k) const {
    return static_cast<size_t>((i * c + ch) * inner + k);
  }
};
Channels channels_of(const Shape& s) { return {s[0], s[1], s.numel() / (s[0] * s[1])}; }

// One channel's statistics and how far an implementation's may be from them.
struct Stats {
  double mean = 0, var = 0, invstd = 0;  // biased variance
  double mean_bound = 0, var_bound = 0, invstd_bound = 0;
};

Stats channel_stats(const HostArray& x, const Channels& L, int64_t ch, double eps, double u) {
  double sum = 0, abs_sum = 0, sq_sum = 0;
  for (int64_t i = 0; i < L.n; ++i) {
    for (int64_t k = 0; k < L.inner; ++k) {
      const double v = x.v[L.at(i, ch, k)];
      sum += v, abs_sum += std::fabs(v), sq_sum += v * v;
    }
  }
  const double K = static_cast<double>(L.count());
  Stats s;
  s.mean = sum / K;
  double dev = 0;
  for (int64_t i = 0; i < L.n; ++i)
    for (int64_t k = 0; k < L.inner; ++k) dev += std::pow(x.v[L.at(i, ch, k)] - s.mean, 2);
  s.var = dev / K;
  s.invstd = 1.0 / std::sqrt(s.var + eps);
  s.mean_bound = reduction_bound(K, abs_sum / K, u, 0, 0) + kUlps * u * std::fabs(s.mean);
  s.var_bound = reduction_bound(K, sq_sum / K, u, 0, 0) + 2 * std::fabs(s.mean) * s.mean_bound +
                kUlps * u * s.var;
  s.invstd_bound = s.invstd * (s.var_bound / (2 * (s.var + eps)) + kUlps * u);
  return s;
}

}  // namespace

BatchNormTrain ref_batch_norm_train(const HostArray& x, const HostArray& gamma,
                                    const HostArray& beta, const HostArray& running_mean,
                                    const HostArray& running_var, double momentum, double eps,
                                    const Arithmetic& a) {
  const Channels L = channels_of(x.shape);
  const Shape c{L.c};
  BatchNormTrain out{Expected(x.shape), Expected(c), Expected(c), Expected(c), Expected(c)};
  const double K = static_cast<double>(L.count()), u = a.ops;
  for (int64_t ch = 0; ch < L.c; ++ch) {
    const Stats s = channel_stats(x, L, ch, eps, u);
    const double g = gamma.v[ch], b = beta.v[ch];
    for (int64_t i = 0; i < L.n; ++i) {
      for (int64_t k = 0; k < L.inner; ++k) {
        const size_t at = L.at(i, ch, k);
        const double centred = x.v[at] - s.mean;
        out.y.want.v[at] = g * centred * s.invstd + b;
        out.y.bound[at] =
            std::fabs(g) * s.invstd * s.mean_bound + std::fabs(g * centred) * s.invstd_bound +
            kUlps * u *
                (std::fabs(g) * s.invstd * (std::fabs(x.v[at]) + std::fabs(s.mean)) + std::fabs(b));
      }
    }
    out.save_mean.want.v[ch] = s.mean, out.save_mean.bound[ch] = s.mean_bound;
    out.save_invstd.want.v[ch] = s.invstd, out.save_invstd.bound[ch] = s.invstd_bound;
    const double rm = (1 - momentum) * running_mean.v[ch], unbiased = s.var * K / (K - 1);
    out.running_mean.want.v[ch] = rm + momentum * s.mean;
    out.running_mean.bound[ch] =
        momentum * s.mean_bound + kUlps * u * (std::fabs(rm) + std::fabs(momentum * s.mean));
    const double rv = (1 - momentum) * running_var.v[ch];
    out.running_var.want.v[ch] = rv + momentum * unbiased;
    out.running_var.bound[ch] =
        momentum * K / (K - 1) * s.var_bound + kUlps * u * (std::fabs(rv) + momentum * unbiased);
  }
  return out;
}

Expected ref_batch_norm_infer(const HostArray& x, const HostArray& gamma, const HostArray& beta,
                              const HostArray& running_mean, const HostArray& running_var,
                              double eps, const Arithmetic& a) {
  const Channels L = channels_of(x.shape);
  Expected e(x.shape);
  for (int64_t ch = 0; ch < L.c; ++ch) {
    const double invstd = 1.0 / std::sqrt(running_var.v[ch] + eps);
    const double g = gamma.v[ch], b = beta.v[ch], m = running_mean.v[ch];
    for (int64_t i = 0; i < L.n; ++i) {
      for (int64_t k = 0; k < L.inner; ++k) {
        const size_t at = L.at(i, ch, k);
        e.want.v[at] = g * (x.v[at] - m) * invstd + b;
        e.bound[at] = kUlps * a.ops *
                      (std::fabs(g) * invstd * (std::fabs(x.v[at]) + std::fabs(m)) + std::fabs(b));
      }
    }
  }
  return e;
}

BatchNormGrads ref_batch_norm_backward(const HostArray& x, const HostArray& dy_in,
                                       const HostArray& gamma, const HostArray& save_mean,
                                       const HostArray& save_invstd, const HostArray* mask,
                                       const Arithmetic& a) {
  const Channels L = channels_of(x.shape);
  const Shape c{L.c};
  BatchNormGrads out{Expected(x.shape), Expected(c), Expected(c)};
  const double K = static_cast<double>(L.count()), u = a.ops;
  auto dy = [&](size_t at) { return mask && !(mask->v[at] > 0) ? 0.0 : dy_in.v[at]; };
  for (int64_t ch = 0; ch < L.c; ++ch) {
    const double mean = save_mean.v[ch], invstd = save_invstd.v[ch], g = gamma.v[ch];
    double sum = 0, abs_sum = 0, dot = 0, abs_dot = 0, form = 0;
    for (int64_t i = 0; i < L.n; ++i) {
      for (int64_t k = 0; k < L.inner; ++k) {
        const size_t at = L.at(i, ch, k);
        const double xhat = (x.v[at] - mean) * invstd;
        sum += dy(at), abs_sum += std::fabs(dy(at));
        dot += dy(at) * xhat, abs_dot += std::fabs(dy(at) * xhat);
        // Forming x̂ itself rounds (x - mean) and the product.
        form += std::fabs(dy(at)) * (std::fabs(x.v[at]) + std::fabs(mean)) * invstd;
      }
    }
    const double sum_bound = reduction_bound(K, abs_sum, u, 0, 0);
    const double dot_bound = reduction_bound(K, abs_dot, u, 0, 0) + kUlps * u * form;
    out.dbeta.want.v[ch] = sum, out.dbeta.bound[ch] = sum_bound;
    out.dgamma.want.v[ch] = dot, out.dgamma.bound[ch] = dot_bound;
    const double k1 = std::fabs(g) * invstd;
    for (int64_t i = 0; i < L.n; ++i) {
      for (int64_t k = 0; k < L.inner; ++k) {
        const size_t at = L.at(i, ch, k);
        const double xhat = (x.v[at] - mean) * invstd;
        out.dx.want.v[at] = g * invstd * (dy(at) - sum / K - xhat * dot / K);
        out.dx.bound[at] =
            k1 * (sum_bound / K + std::fabs(xhat) * dot_bound / K +
                  kUlps * u *
                      (std::fabs(dy(at)) + std::fabs(sum) / K + std::fabs(xhat * dot) / K +
                       (std::fabs(x.v[at]) + std::fabs(mean)) * invstd * std::fabs(dot) / K));
      }
    }
  }
  return out;
}

void ref_relu_in_place(Expected& e) {
  for (double& v : e.want.v) v = v > 0 ? v : 0.0;
}

}  // namespace dlb
