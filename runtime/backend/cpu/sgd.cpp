// SGD with momentum and weight decay, step for step as torch.optim.SGD (dampening 0); with loss
// scaling, on the gradient times 1/scale, or skipped, as GradScaler.step.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/f32_views.h"
#include "runtime/backend/cpu/parallel.h"
#include "runtime/core/error.h"
#include "runtime/core/half.h"

namespace dlb {
namespace {

// The update of elements [0, n): the arithmetic of every CPU update, whatever stores the tensors.
struct SgdStep {
  float lr, momentum, decay, grad_factor;
  void operator()(const float* g, float* buf, float* p, int64_t n) const {
    // The settings in locals: read through `this` they would be reloaded after every store (a
    // float store may alias them), which keeps the loop from vectorizing.
    const float lr_ = lr, momentum_ = momentum, decay_ = decay, factor = grad_factor;
    if (factor == 1.f) {  // unscaled: exactly the loop of an fp32 run
      for (int64_t i = 0; i < n; ++i) {
        const float d = g[i] + decay_ * p[i];
        buf[i] = momentum_ * buf[i] + d;
        p[i] -= lr_ * buf[i];
      }
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      const float d = g[i] * factor + decay_ * p[i];
      buf[i] = momentum_ * buf[i] + d;
      p[i] -= lr_ * buf[i];
    }
  }
};

// Elementwise over the stored elements: the three tensors must store them in one order.
void check_same_layout(const Tensor& a, const Tensor& b, std::string_view what) {
  if (a.layout() != b.layout() && a.shape().rank() == 4) {
    throw InvalidArgument(fmt::format("{}: layouts differ ({} vs {})", what,
                                      layout_name(a.layout()), layout_name(b.layout())));
  }
}

void sgd(const SgdConfig& cfg, const Tensor& grad, float grad_factor, Tensor& momentum_buf,
         Tensor& param) {
  check_same_shape(grad, param, "sgd");
  check_same_shape(momentum_buf, param, "sgd momentum");
  check_same_layout(grad, param, "sgd");
  check_same_layout(momentum_buf, param, "sgd momentum");
  const float* g = grad.data<float>();
  float* buf = momentum_buf.data<float>();
  float* p = param.data<float>();
  const SgdStep step{cfg.lr, cfg.momentum, cfg.weight_decay, grad_factor};
  parallel_blocks(param.numel(), kParallelElements, [=](int64_t begin, int64_t end) {
    step(g + begin, buf + begin, p + begin, end - begin);
  });
}

// The factor a loss-scaled update multiplies the gradient by: 1/scale, in double rounded to float
// once as GradScaler's; none when the step is skipped (an inf or NaN gradient was found).
std::optional<float> unscale_factor(const Tensor& scaler) {
  check_f32(scaler, "loss-scale state");
  const float* state = scaler.data<float>();
  if (state[kFoundInfSlot] != 0.f) return std::nullopt;
  return static_cast<float>(1.0 / static_cast<double>(state[kScaleSlot]));
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
  const std::optional<float> factor = unscale_factor(scaler);
  if (!factor) return;  // the step is skipped
  F32Views f32(*this);
  sgd(cfg, f32.in(grad_s), *factor, f32.inout(momentum_buf_s), f32.inout(param_s));
}

// A mixed-precision update in one pass over the parameter: the 16-bit gradient widened a chunk
// at a time, the f32 master weights and momentum updated as sgd() does, and the chunk's weights
// rounded into the 16-bit compute copy, as the composed update and cast would (the same bits,
// without an f32 copy of the gradient, nor a second pass to cast).
void CpuBackend::sgd_update_with_copy(const SgdConfig& cfg, const Tensor& grad,
                                      const Tensor* scaler, Tensor& momentum_buf, Tensor& param,
                                      Tensor& compute) {
  const bool f32_state = param.dtype() == DType::kF32 && momentum_buf.dtype() == DType::kF32;
  if (!f32_state || !is_16bit(grad.dtype()) || !is_16bit(compute.dtype())) {
    return Backend::sgd_update_with_copy(cfg, grad, scaler, momentum_buf, param, compute);
  }
  const std::optional<float> factor = scaler ? unscale_factor(*scaler) : 1.f;
  if (!factor) return;  // skipped: the compute copy already holds the unchanged weights
  check_same_shape(grad, param, "sgd");
  check_same_shape(momentum_buf, param, "sgd momentum");
  check_same_shape(compute, param, "sgd compute copy");
  check_same_layout(grad, param, "sgd");
  check_same_layout(momentum_buf, param, "sgd momentum");
  check_same_layout(compute, param, "sgd compute copy");
  const SgdStep step{cfg.lr, cfg.momentum, cfg.weight_decay, *factor};
  const auto* g = static_cast<const uint8_t*>(grad.raw());
  auto* out = static_cast<uint8_t*>(compute.raw());
  float* buf = momentum_buf.data<float>();
  float* p = param.data<float>();
  const DType gt = grad.dtype(), ct = compute.dtype();
  parallel_blocks(param.numel(), kParallelElements, [=](int64_t begin, int64_t end) {
    constexpr int64_t kChunk = 1024;
    float wide[kChunk];
    for (int64_t at = begin; at < end; at += kChunk) {
      const int64_t n = std::min(kChunk, end - at);
      dtype_to_floats(g + at * dtype_size(gt), n, gt, wide);
      step(wide, buf + at, p + at, n);
      floats_to_dtype(p + at, n, ct, out + at * dtype_size(ct));
    }
  });
}

}  // namespace dlb
