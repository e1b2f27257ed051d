// Loss scaling's bookkeeping: the inf/NaN check over gradients and GradScaler.update, with
// PyTorch's semantics (aten/src/ATen/native/cuda/AmpKernels.cu, _amp_update_scale_cuda_kernel).
#include <cmath>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/f32_views.h"

namespace dlb {

// On the stored bits (no f32 copy of the gradients): a 16-bit value is inf or NaN when its
// exponent is all ones. As GradScaler, which checks the gradients times 1/scale, a scale so small
// that 1/scale is infinite counts as found too (0 x inf is NaN there).
void CpuBackend::find_non_finite(const Tensor& grads, Tensor& scaler) {
  check_f32(scaler, "loss-scale state");
  float* s = scaler.data<float>();
  bool found = !std::isfinite(static_cast<float>(1.0 / static_cast<double>(s[kScaleSlot])));
  if (is_16bit(grads.dtype())) {
    const uint16_t exponent = grads.dtype() == DType::kF16 ? 0x7c00 : 0x7f80;
    const auto* g = grads.data<uint16_t>();
    for (int64_t i = 0; i < grads.numel(); ++i) found |= (g[i] & exponent) == exponent;
  } else {
    check_f32(grads, "gradients");
    const float* g = grads.data<float>();
    for (int64_t i = 0; i < grads.numel(); ++i) found |= !std::isfinite(g[i]);
  }
  if (found) s[kFoundInfSlot] = 1.f;
}

void CpuBackend::update_loss_scale(const LossScaleConfig& cfg, Tensor& scaler) {
  check_f32(scaler, "loss-scale state");
  update_loss_scale_state(cfg, scaler.data<float>());
}

}  // namespace dlb
