// SGD with momentum and weight decay, step for step as torch.optim.SGD (dampening 0); with loss
// scaling, on the gradient times 1/scale, or skipped, as GradScaler.step.
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/f32_views.h"
#include "runtime/backend/cpu/parallel.h"

namespace dlb {
namespace {

void sgd(const SgdConfig& cfg, const Tensor& grad, float grad_factor, Tensor& momentum_buf,
         Tensor& param) {
  check_same_shape(grad, param, "sgd");
  check_same_shape(momentum_buf, param, "sgd momentum");
  const float* g = grad.data<float>();
  float* buf = momentum_buf.data<float>();
  float* p = param.data<float>();
  // The count and the settings in locals: read through `cfg` and numel() they would be reloaded
  // after every store (a float store may alias them), which keeps the loop from vectorizing.
  const int64_t n = param.numel();
  const float lr = cfg.lr, momentum = cfg.momentum, decay = cfg.weight_decay;
  parallel_blocks(n, kParallelElements, [=](int64_t begin, int64_t end) {
    if (grad_factor == 1.f) {  // unscaled: exactly the loop of an fp32 run
      for (int64_t i = begin; i < end; ++i) {
        const float d = g[i] + decay * p[i];
        buf[i] = momentum * buf[i] + d;
        p[i] -= lr * buf[i];
      }
      return;
    }
    for (int64_t i = begin; i < end; ++i) {
      const float d = g[i] * grad_factor + decay * p[i];
      buf[i] = momentum * buf[i] + d;
      p[i] -= lr * buf[i];
    }
  });
}

}  // namespace

void CpuBackend::sgd_update(const SgdConfig& cfg, const Tensor& grad_s, Tensor& momentum_buf_s,
                            Tensor& param_s) {
  F32Views f32(*this);
  sgd(cfg, f32.in(grad_s), 1.f, f32.inout(momentum_buf_s), f32.inout(param_s));
}

void CpuBackend::sgd_update_unscaled(const SgdConfig& cfg, const Tensor& grad_s,
                                     const Tensor& scaler, Tensor& momentum_buf_s,
                                     Tensor& param_s) {
  check_f32(scaler, "loss-scale state");
  const float* state = scaler.data<float>();
  if (state[kFoundInfSlot] != 0.f) return;  // the step is skipped
  // As GradScaler: the reciprocal in double, rounded to float once.
  const auto inv_scale = static_cast<float>(1.0 / static_cast<double>(state[kScaleSlot]));
  F32Views f32(*this);
  sgd(cfg, f32.in(grad_s), inv_scale, f32.inout(momentum_buf_s), f32.inout(param_s));
}

}  // namespace dlb
