// SGD and loss scaling on our kernels (optimizer_kernels.h): f32 master weights and momentum,
// gradients of any storage type.
#include <fmt/format.h>

#include "runtime/backend/cuda/cuda_backend_impl.h"
#include "runtime/backend/cuda/optimizer_kernels.h"

namespace dlb::cuda {

void CudaBackend::sgd_update(const SgdConfig& cfg, const Tensor& grad, Tensor& momentum_buf,
                             Tensor& param) {
  sgd(cfg, grad, nullptr, momentum_buf, param, nullptr);
}

void CudaBackend::sgd_update_unscaled(const SgdConfig& cfg, const Tensor& grad,
                                      const Tensor& scaler, Tensor& momentum_buf, Tensor& param) {
  check_scaler(scaler);
  sgd(cfg, grad, &scaler, momentum_buf, param, nullptr);
}

void CudaBackend::sgd_update_with_copy(const SgdConfig& cfg, const Tensor& grad,
                                       const Tensor* scaler, Tensor& momentum_buf, Tensor& param,
                                       Tensor& compute) {
  if (compute.dtype() != grad.dtype()) {
    Backend::sgd_update_with_copy(cfg, grad, scaler, momentum_buf, param, compute);
    return;
  }
  if (scaler) check_scaler(*scaler);
  sgd(cfg, grad, scaler, momentum_buf, param, &compute);
}

void CudaBackend::find_non_finite(const Tensor& grads, Tensor& scaler) {
  check_scaler(scaler);
  with_storage(grads.dtype(), "gradients", [&](auto tag) {
    using T = decltype(tag);
    run(grads.numel(), FindNonFinite<T>{as<T>(grads), scaler.data<float>()});
  });
}

void CudaBackend::update_loss_scale(const LossScaleConfig& cfg, Tensor& scaler) {
  check_scaler(scaler);
  run(1, UpdateLossScale{cfg, scaler.data<float>()});
}

void CudaBackend::check_scaler(const Tensor& scaler) {
  check_f32(scaler, "loss-scale state");
  check_numel(scaler, kLossScaleSlots, "loss-scale state");
}

void CudaBackend::sgd(const SgdConfig& cfg, const Tensor& grad, const Tensor* scaler,
                      Tensor& momentum_buf, Tensor& param, Tensor* compute) {
  check_f32(param, "sgd master weights");
  check_f32(momentum_buf, "sgd momentum");
  check_numel(grad, param.numel(), "sgd gradient");
  check_numel(momentum_buf, param.numel(), "sgd momentum");
  if (compute) same(grad, *compute, "sgd compute copy");
  // A conv weight's gradient (and copy) may be channels-last; its master is torchvision's NCHW.
  const ToChannelsLast to = relayout(param, grad, "sgd gradient");
  const float* state = scaler ? scaler->data<float>() : nullptr;
  with_storage(grad.dtype(), "sgd gradient", [&](auto tag) {
    using G = decltype(tag);
    run(param.numel(), SgdUpdate<G>{cfg, as<G>(grad), state, momentum_buf.data<float>(),
                                    param.data<float>(), compute ? as<G>(*compute) : nullptr, to});
  });
}

}  // namespace dlb::cuda
