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
  // Scratch: each row's maximum, sum and loss term, then the terms' sum.
  char* scratch = static_cast<char*>(
      workspace(static_cast<size_t>(rows) * (sizeof(RowMax) + sizeof(RowSum) + sizeof(double)) +
                sizeof(RowSum)));
  auto* maxes = reinterpret_cast<RowMax*>(scratch);
  auto* sums = reinterpret_cast<RowSum*>(maxes + rows);
  auto* terms = reinterpret_cast<double*>(sums + rows);
  auto* total = reinterpret_cast<RowSum*>(terms + rows);
  const ChannelRows by_row{rows, classes, false};
  with_storage(logits.dtype(), "logits", [&](auto tag) {
    using T = decltype(tag);
    reduce(rows, classes, 1, SoftmaxRowMax<T>{as<T>(logits), by_row}, maxes);
    reduce(rows, classes, 1, SoftmaxRowSum<T>{as<T>(logits), maxes, by_row}, sums);
    run(rows * classes, SoftmaxProbabilities<T>{as<T>(logits), labels.data<int64_t>(), classes,
                                                maxes, sums, probs.data<float>(), terms});
  });
  reduce(1, rows, 1, LossTermsSum{terms, ChannelRows{1, rows, false}}, total);
  run(1, LossMean{total, rows, loss.data<float>()});
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
