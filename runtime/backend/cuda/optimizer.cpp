// SGD and loss scaling on our kernels (optimizer_kernels.h): f32 master weights and momentum,
// gradients of any storage type.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>

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

namespace {

// A parameter's tensors as SgdUpdate reads them: f32 master weights and momentum of its size, the
// compute copy stored as the gradient, and where the gradient's elements are (channels-last).
ToChannelsLast check_sgd(const SgdParamRef& p) {
  check_f32(*p.param, "sgd master weights");
  check_f32(*p.momentum, "sgd momentum");
  check_numel(*p.grad, p.param->numel(), "sgd gradient");
  check_numel(*p.momentum, p.param->numel(), "sgd momentum");
  // A conv weight's gradient (and copy) may be channels-last; its master is torchvision's NCHW.
  return relayout(*p.param, *p.grad, "sgd gradient");
}

}  // namespace

void CudaBackend::sgd(const SgdConfig& cfg, const Tensor& grad, const Tensor* scaler,
                      Tensor& momentum_buf, Tensor& param, Tensor* compute) {
  const ToChannelsLast to = check_sgd({&grad, &momentum_buf, &param, compute});
  if (compute) same(grad, *compute, "sgd compute copy");
  const float* state = scaler ? scaler->data<float>() : nullptr;
  with_storage(grad.dtype(), "sgd gradient", [&](auto tag) {
    using G = decltype(tag);
    run(param.numel(), SgdUpdate<G>{cfg, as<G>(grad), state, momentum_buf.data<float>(),
                                    param.data<float>(), compute ? as<G>(*compute) : nullptr, to});
  });
}

void CudaBackend::sgd_update_group(const SgdConfig& cfg, const std::vector<SgdParamRef>& group,
                                   const Tensor* scaler) {
  if (scaler) check_scaler(*scaler);
  std::map<DType, std::vector<SgdParamRef>> by_type;
  std::vector<SgdParamRef> rest;
  for (const SgdParamRef& p : group) {
    if (p.compute && p.compute->dtype() != p.grad->dtype()) {
      rest.push_back(p);
    } else {
      by_type[p.grad->dtype()].push_back(p);
    }
  }
  for (const auto& [type, params] : by_type) {
    with_storage(type, "sgd gradient",
                 [&](auto tag) { sgd_table<decltype(tag)>(cfg, params, scaler); });
  }
  if (!rest.empty()) Backend::sgd_update_group(cfg, rest, scaler);
}

template <typename G>
void CudaBackend::sgd_table(const SgdConfig& cfg, const std::vector<SgdParamRef>& group,
                            const Tensor* scaler) {
  // Some 14 KiB: on the heap here, passed by value to the launch.
  auto table = std::make_unique<MultiSgdUpdate<G>>();
  table->cfg = cfg;
  table->scaler = scaler ? scaler->data<float>() : nullptr;
  for (size_t first = 0; first < group.size(); first += kSgdTableSlots) {
    const size_t end = std::min(group.size(), first + kSgdTableSlots);
    int64_t total = 0;
    table->count = 0;
    for (size_t k = first; k < end; ++k) {
      const SgdParamRef& p = group[k];
      const ToChannelsLast to = check_sgd(p);
      if (p.compute) same(*p.grad, *p.compute, "sgd compute copy");
      table->slots[table->count++] = {as<G>(*p.grad),
                                      p.momentum->data<float>(),
                                      p.param->data<float>(),
                                      p.compute ? as<G>(*p.compute) : nullptr,
                                      to,
                                      total};
      total += p.param->numel();
    }
    run(total, *table);
  }
}

}  // namespace dlb::cuda
