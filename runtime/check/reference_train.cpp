// The float64 references of the loss (torch.nn.CrossEntropyLoss: mean over the batch of
// log-sum-exp minus the label's logit), the SGD update (torch.optim.SGD, dampening 0) and
// GradScaler's scale update.
#include <algorithm>
#include <cmath>

#include "runtime/check/bounds.h"
#include "runtime/check/reference.h"

namespace dlb {

SoftmaxCrossEntropy ref_softmax_cross_entropy(const HostArray& logits,
                                              const std::vector<int64_t>& labels,
                                              const Arithmetic& a) {
  const int64_t n = logits.shape[0], c = logits.shape[1];
  SoftmaxCrossEntropy out{Expected(logits.shape), Expected(Shape{1})};
  const double u = a.ops, sum_k = kC * std::sqrt(static_cast<double>(c)) * u;
  double total = 0, total_abs = 0, per_sample = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double* z = logits.v.data() + i * c;
    const double m = *std::max_element(z, z + c);
    double s = 0;
    for (int64_t j = 0; j < c; ++j) s += std::exp(z[j] - m);
    const double log_s = std::log(s), lse = m + log_s;
    for (int64_t j = 0; j < c; ++j) {
      const size_t at = static_cast<size_t>(i * c + j);
      const double p = std::exp(z[j] - lse);
      out.probs.want.v[at] = p;
      // The sum's relative error moves log s; the exponent's rounding moves p relatively.
      out.probs.bound[at] = p * (sum_k + kUlps * u * (1 + std::fabs(z[j] - m) + std::fabs(log_s)));
    }
    const double zl = z[labels[static_cast<size_t>(i)]];
    const double l = lse - zl;
    total += l, total_abs += std::fabs(l);
    per_sample += sum_k + kUlps * u * (std::fabs(m) + std::fabs(log_s) + std::fabs(zl));
  }
  const double N = static_cast<double>(n);
  out.loss.want.v[0] = total / N;
  out.loss.bound[0] = per_sample / N + reduction_bound(N, total_abs / N, u, 0, 0);
  return out;
}

Expected ref_softmax_cross_entropy_backward(const HostArray& probs,
                                            const std::vector<int64_t>& labels, double scale,
                                            const Arithmetic& a) {
  const int64_t n = probs.shape[0], c = probs.shape[1];
  Expected e(probs.shape);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < c; ++j) {
      const size_t at = static_cast<size_t>(i * c + j);
      const double hit = j == labels[static_cast<size_t>(i)] ? 1.0 : 0.0;
      e.want.v[at] = scale * (probs.v[at] - hit) / static_cast<double>(n);
      e.bound[at] =
          elementwise_bound(scale * (probs.v[at] + hit) / static_cast<double>(n), a.ops, 0, 0);
    }
  }
  return e;
}

SgdStep ref_sgd(const SgdConfig& cfg, const HostArray& grad, const HostArray& momentum,
                const HostArray& param, double inv_scale, const Arithmetic& a) {
  SgdStep out{Expected(param.shape), Expected(param.shape)};
  const double m = cfg.momentum, wd = cfg.weight_decay, lr = cfg.lr;
  for (size_t i = 0; i < param.v.size(); ++i) {
    const double g = grad.v[i] * inv_scale, p = param.v[i];
    const double buf = m * momentum.v[i] + (g + wd * p);
    const double buf_bound = elementwise_bound(
        std::fabs(m * momentum.v[i]) + std::fabs(g) + std::fabs(wd * p), a.ops, 0, 0);
    out.momentum.want.v[i] = buf, out.momentum.bound[i] = buf_bound;
    out.param.want.v[i] = p - lr * buf;
    out.param.bound[i] =
        lr * buf_bound + elementwise_bound(std::fabs(p) + std::fabs(lr * buf), a.ops, 0, 0);
  }
  return out;
}

std::vector<double> ref_loss_scale_update(const LossScaleConfig& cfg, std::vector<double> s) {
  // GradScaler.update: an inf or NaN this step backs the scale off and restarts the count of
  // clean steps; otherwise the count grows, and reaching growth_interval grows the scale (unless
  // the grown scale is not finite in f32) and restarts the count.
  if (s[kFoundInfSlot] != 0) {
    s[kScaleSlot] = static_cast<float>(s[kScaleSlot] * cfg.backoff);
    s[kCleanStepsSlot] = 0;
    s[kSkippedSlot] += 1;
  } else if (s[kCleanStepsSlot] + 1 >= static_cast<double>(cfg.growth_interval)) {
    const float grown = static_cast<float>(s[kScaleSlot] * cfg.growth);
    if (std::isfinite(grown)) s[kScaleSlot] = grown;
    s[kCleanStepsSlot] = 0;
  } else {
    s[kCleanStepsSlot] += 1;
  }
  s[kFoundInfSlot] = 0;
  return s;
}

}  // namespace dlb
