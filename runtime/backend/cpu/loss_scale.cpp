// Loss scaling's bookkeeping: the inf/NaN check over gradients and GradScaler.update, with
// PyTorch's semantics (aten/src/ATen/native/cuda/AmpKernels.cu, _amp_update_scale_cuda_kernel).
#include <cmath>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/f32_views.h"

namespace dlb {

void CpuBackend::find_non_finite(const Tensor& grads_s, Tensor& scaler) {
  check_f32(scaler, "loss-scale state");
  F32Views f32(*this);
  const Tensor& grads = f32.in(grads_s);
  const float* g = grads.data<float>();
  bool found = false;
  for (int64_t i = 0; i < grads.numel(); ++i) found |= !std::isfinite(g[i]);
  if (found) scaler.data<float>()[kFoundInfSlot] = 1.f;
}

void CpuBackend::update_loss_scale(const LossScaleConfig& cfg, Tensor& scaler) {
  check_f32(scaler, "loss-scale state");
  float* s = scaler.data<float>();
  if (s[kFoundInfSlot] != 0.f) {
    s[kScaleSlot] *= cfg.backoff;
    s[kCleanStepsSlot] = 0.f;
    s[kSkippedSlot] += 1.f;
  } else if (s[kCleanStepsSlot] + 1.f >= static_cast<float>(cfg.growth_interval)) {
    const float grown = s[kScaleSlot] * cfg.growth;
    if (std::isfinite(grown)) s[kScaleSlot] = grown;
    s[kCleanStepsSlot] = 0.f;
  } else {
    s[kCleanStepsSlot] += 1.f;
  }
  s[kFoundInfSlot] = 0.f;
}

}  // namespace dlb
