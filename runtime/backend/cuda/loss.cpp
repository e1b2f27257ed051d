// Softmax cross-entropy and its gradient on our kernels (loss_kernels.h).
#include <fmt/format.h>

#include "runtime/backend/cuda/cuda_backend_impl.h"
#include "runtime/backend/cuda/loss_kernels.h"

namespace dlb::cuda {

void CudaBackend::softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor& probs,
                                        Tensor& loss) {
  check_f32(probs, "softmax probabilities");
  check_f32(loss, "loss");
  check_numel(probs, logits.numel(), "softmax probabilities");
  const int64_t rows = logits.dim(0), classes = logits.dim(1);
  if (labels.dtype() != DType::kI64) throw InvalidArgument("cuda: labels must be int64");
  check_numel(labels, rows, "labels");
  check_numel(loss, 1, "loss");
  auto* row_loss = static_cast<double*>(workspace(static_cast<size_t>(rows) * sizeof(double)));
  with_storage(logits.dtype(), "logits", [&](auto tag) {
    using T = decltype(tag);
    run(rows, SoftmaxCrossEntropyRow<T>{as<T>(logits), labels.data<int64_t>(), classes,
                                        probs.data<float>(), row_loss});
  });
  run(1, MeanOfRows{row_loss, rows, loss.data<float>()});
}

void CudaBackend::softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                                 Tensor& dlogits) {
  loss_gradient(probs, labels, nullptr, dlogits);
}

void CudaBackend::softmax_cross_entropy_backward_scaled(const Tensor& probs, const Tensor& labels,
                                                        const Tensor& scaler, Tensor& dlogits) {
  check_scaler(scaler);
  loss_gradient(probs, labels, scaler.data<float>(), dlogits);
}

void CudaBackend::loss_gradient(const Tensor& probs, const Tensor& labels, const float* scaler,
                                Tensor& dlogits) {
  check_f32(probs, "softmax probabilities");
  check_numel(dlogits, probs.numel(), "logits gradient");
  const int64_t rows = probs.dim(0), classes = probs.dim(1);
  with_storage(dlogits.dtype(), "logits gradient", [&](auto tag) {
    using T = decltype(tag);
    run(probs.numel(), SoftmaxCrossEntropyBackward<T>{probs.data<float>(), labels.data<int64_t>(),
                                                      scaler, rows, classes, as<T>(dlogits)});
  });
}

}  // namespace dlb::cuda
