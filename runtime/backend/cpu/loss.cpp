// Softmax cross-entropy, mean over the batch, as torch.nn.CrossEntropyLoss computes it.
#include <fmt/format.h>

#include <cmath>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/f32_views.h"
#include "runtime/core/error.h"

namespace dlb {
namespace {
void check_labels(const Tensor& labels, int64_t batch, int64_t classes) {
  if (labels.dtype() != DType::kI64 || labels.numel() != batch) {
    throw InvalidArgument(fmt::format("labels must be {} int64 values (got {} {})", batch,
                                      labels.numel(), dtype_name(labels.dtype())));
  }
  const int64_t* l = labels.data<int64_t>();
  for (int64_t i = 0; i < batch; ++i) {
    if (l[i] < 0 || l[i] >= classes) {
      throw InvalidArgument(
          fmt::format("label {} at index {} is outside [0, {})", l[i], i, classes));
    }
  }
}
}  // namespace

void CpuBackend::softmax_cross_entropy(const Tensor& logits_s, const Tensor& labels,
                                       Tensor& probs_s, Tensor& loss_s) {
  F32Views f32(*this);
  const Tensor& logits = f32.in(logits_s);
  Tensor& probs = f32.out(probs_s);
  Tensor& loss = f32.out(loss_s);
  check_f32(logits, "logits");
  const int64_t n = logits.dim(0), k = logits.dim(1);
  check_labels(labels, n, k);
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* z = logits.data<float>() + i * k;
    float* p = probs.data<float>() + i * k;
    float mx = z[0];
    for (int64_t j = 1; j < k; ++j) mx = std::max(mx, z[j]);
    double s = 0;
    for (int64_t j = 0; j < k; ++j) s += std::exp(static_cast<double>(z[j] - mx));
    const double log_s = std::log(s);
    for (int64_t j = 0; j < k; ++j) p[j] = static_cast<float>(std::exp(z[j] - mx - log_s));
    total += log_s - (z[labels.data<int64_t>()[i]] - mx);
  }
  loss.data<float>()[0] = static_cast<float>(total / n);
}

namespace {

// dlogits = scale * (probs - onehot(labels)) / n, in f32.
void loss_gradient(const Tensor& probs, const Tensor& labels, float scale, Tensor& dlogits) {
  const int64_t n = probs.dim(0), k = probs.dim(1);
  const float inv_n = 1.f / static_cast<float>(n);
  for (int64_t i = 0; i < n; ++i) {
    const float* p = probs.data<float>() + i * k;
    float* g = dlogits.data<float>() + i * k;
    for (int64_t j = 0; j < k; ++j) g[j] = p[j] * inv_n;
    g[labels.data<int64_t>()[i]] -= inv_n;
    if (scale != 1.f) {
      for (int64_t j = 0; j < k; ++j) g[j] *= scale;
    }
  }
}

}  // namespace

void CpuBackend::softmax_cross_entropy_backward(const Tensor& probs_s, const Tensor& labels,
                                                Tensor& dlogits_s) {
  F32Views f32(*this);
  loss_gradient(f32.in(probs_s), labels, 1.f, f32.out(dlogits_s));
}

// Scaled before it is rounded to dlogits' type: small gradients survive fp16, which is what
// loss scaling is for.
void CpuBackend::softmax_cross_entropy_backward_scaled(const Tensor& probs_s, const Tensor& labels,
                                                       const Tensor& scaler, Tensor& dlogits_s) {
  check_f32(scaler, "loss-scale state");
  F32Views f32(*this);
  loss_gradient(f32.in(probs_s), labels, scaler.data<float>()[kScaleSlot], f32.out(dlogits_s));
}

}  // namespace dlb
