// Loss scaling's bookkeeping: the inf/NaN check over gradients and GradScaler.update, with
// PyTorch's semantics (aten/src/ATen/native/cuda/AmpKernels.cu, _amp_update_scale_cuda_kernel).
#include <atomic>
#include <cmath>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/f32_views.h"
#include "runtime/backend/cpu/parallel.h"

namespace dlb {

// On the stored bits (no f32 copy of the gradients): a 16-bit value is inf or NaN when its
// exponent is all ones. As GradScaler, which checks the gradients times 1/scale, a scale so small
// that 1/scale is infinite counts as found too (0 x inf is NaN there).
void CpuBackend::find_non_finite(const Tensor& grads, Tensor& scaler) {
  check_f32(scaler, "loss-scale state");
  float* s = scaler.data<float>();
  std::atomic<bool> found =
      !std::isfinite(static_cast<float>(1.0 / static_cast<double>(s[kScaleSlot])));
  const int64_t n = grads.numel();
  if (is_16bit(grads.dtype())) {
    const uint16_t exponent = grads.dtype() == DType::kF16 ? 0x7c00 : 0x7f80;
    const auto* g = grads.data<uint16_t>();
    parallel_blocks(n, kParallelElements, [&found, g, exponent](int64_t begin, int64_t end) {
      bool any = false;
      for (int64_t i = begin; i < end; ++i) any |= (g[i] & exponent) == exponent;
      if (any) found = true;
    });
  } else {
    check_f32(grads, "gradients");
    const float* g = grads.data<float>();
    parallel_blocks(n, kParallelElements, [&found, g](int64_t begin, int64_t end) {
      bool any = false;
      for (int64_t i = begin; i < end; ++i) any |= !std::isfinite(g[i]);
      if (any) found = true;
    });
  }
  if (found) s[kFoundInfSlot] = 1.f;
}

void CpuBackend::update_loss_scale(const LossScaleConfig& cfg, Tensor& scaler) {
  check_f32(scaler, "loss-scale state");
  update_loss_scale_state(cfg, scaler.data<float>());
}

}  // namespace dlb
