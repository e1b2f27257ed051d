// SGD with momentum and weight decay, step for step as torch.optim.SGD (dampening 0).
#include "runtime/backend/cpu/cpu_backend.h"

namespace dlb {

void CpuBackend::sgd_update(const SgdConfig& cfg, const Tensor& grad, Tensor& momentum_buf,
                            Tensor& param) {
  check_same_shape(grad, param, "sgd");
  check_same_shape(momentum_buf, param, "sgd momentum");
  const float* g = grad.data<float>();
  float* buf = momentum_buf.data<float>();
  float* p = param.data<float>();
  for (int64_t i = 0; i < param.numel(); ++i) {
    const float d = g[i] + cfg.weight_decay * p[i];
    buf[i] = cfg.momentum * buf[i] + d;
    p[i] -= cfg.lr * buf[i];
  }
}

}  // namespace dlb
