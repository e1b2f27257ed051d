// Softmax cross-entropy, mean over the batch, as torch.nn.CrossEntropyLoss computes it.
#include <fmt/format.h>

#include <cmath>

#include "runtime/backend/cpu/cpu_backend.h"
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

void CpuBackend::softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor& probs,
                                       Tensor& loss) {
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

void CpuBackend::softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                                Tensor& dlogits) {
  const int64_t n = probs.dim(0), k = probs.dim(1);
  const float inv_n = 1.f / static_cast<float>(n);
  for (int64_t i = 0; i < n; ++i) {
    const float* p = probs.data<float>() + i * k;
    float* g = dlogits.data<float>() + i * k;
    for (int64_t j = 0; j < k; ++j) g[j] = p[j] * inv_n;
    g[labels.data<int64_t>()[i]] -= inv_n;
  }
}

}  // namespace dlb
