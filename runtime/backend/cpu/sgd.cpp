// SGD with momentum and weight decay, step for step as torch.optim.SGD (dampening 0); with loss
// scaling, on the gradient times 1/scale, or skipped, as GradScaler.step.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <type_traits>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/f32_views.h"
#include "runtime/backend/cpu/parallel.h"
#include "runtime/backend/cpu/pointwise_loops.h"
#include "runtime/core/error.h"
#include "runtime/core/half.h"
#include "runtime/core/layout_order.h"

namespace dlb {
namespace {

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
  const auto update = sgd_loops(host_cpu_isa()).update;
  parallel_blocks(param.numel(), kParallelElements, [=](int64_t begin, int64_t end) {
    update(step, g + begin, buf + begin, p + begin, end - begin);
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

// The gradient in f32 and in the master's order: its F32Views copy, or, for a channels-last
// gradient of a KCRS master (a conv weight oneDNN does not block, beside channels-last
// activations), a copy reordered into `reordered` (exact: widened and moved).
const Tensor& f32_in_masters_order(CpuBackend& b, F32Views& f32, const Tensor& grad,
                                   const Tensor& param, Tensor& reordered) {
  if (grad.shape().rank() != 4 || grad.layout() == param.layout()) return f32.in(grad);
  check_same_shape(grad, param, "sgd");
  reordered = b.empty(param.shape(), DType::kF32, MemCategory::kWorkspace,
                      "sgd gradient in the weights' order", param.layout());
  b.cast(grad, reordered);
  return reordered;
}

}  // namespace

void CpuBackend::sgd_update(const SgdConfig& cfg, const Tensor& grad_s, Tensor& momentum_buf_s,
                            Tensor& param_s) {
  F32Views f32(*this);
  Tensor reordered;
  sgd(cfg, f32_in_masters_order(*this, f32, grad_s, param_s, reordered), 1.f,
      f32.inout(momentum_buf_s), f32.inout(param_s));
}

void CpuBackend::sgd_update_unscaled(const SgdConfig& cfg, const Tensor& grad_s,
                                     const Tensor& scaler, Tensor& momentum_buf_s,
                                     Tensor& param_s) {
  const std::optional<float> factor = unscale_factor(scaler);
  if (!factor) return;  // the step is skipped
  F32Views f32(*this);
  Tensor reordered;
  sgd(cfg, f32_in_masters_order(*this, f32, grad_s, param_s, reordered), *factor,
      f32.inout(momentum_buf_s), f32.inout(param_s));
}

// A conv weight that oneDNN does not block, beside channels-last activations: its gradient and
// compute copy are channels last (KRSC), its master and momentum torchvision's KCRS. The update
// runs on the gradient reordered into the master's order (exact: the same type), and the copy is
// reordered back from the one it writes: the bits of the update in either order.
void CpuBackend::update_in_masters_order(const SgdConfig& cfg, const Tensor& grad,
                                         const Tensor* scaler, Tensor& momentum_buf, Tensor& param,
                                         Tensor& compute) {
  if (scaler && !unscale_factor(*scaler)) return;  // skipped: the weights and copy stay as they are
  check_same_shape(grad, param, "sgd");
  check_same_shape(compute, param, "sgd compute copy");
  Tensor g = empty(param.shape(), grad.dtype(), MemCategory::kWorkspace,
                   "sgd gradient in the weights' order", param.layout());
  Tensor c = empty(param.shape(), compute.dtype(), MemCategory::kWorkspace,
                   "sgd compute copy in the weights' order", param.layout());
  cast(grad, g);  // moved bit for bit, as is the copy below (CpuBackend::cast)
  sgd_update_with_copy(cfg, g, scaler, momentum_buf, param, c);
  cast(c, compute);
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
  if (grad.shape().rank() == 4 && grad.layout() != param.layout()) {
    return update_in_masters_order(cfg, grad, scaler, momentum_buf, param, compute);
  }
  const std::optional<float> factor = scaler ? unscale_factor(*scaler) : 1.f;
  if (!factor) return;  // skipped: the compute copy already holds the unchanged weights
  check_same_shape(grad, param, "sgd");
  check_same_shape(momentum_buf, param, "sgd momentum");
  check_same_shape(compute, param, "sgd compute copy");
  check_same_layout(grad, param, "sgd");
  check_same_layout(momentum_buf, param, "sgd momentum");
  // The copy in the weights' order, or in pairs of input channels (conv_weight_copy_layout).
  const bool into_pairs =
      param.layout() == Layout::kOIhw16i16o && compute.layout() == Layout::kOIhw8i16o2i;
  if (!into_pairs) check_same_layout(compute, param, "sgd compute copy");
  const SgdStep step{cfg.lr, cfg.momentum, cfg.weight_decay, *factor};
  with_stored_float(grad.dtype(), "sgd gradient", [&](auto g) {
    with_stored_float(compute.dtype(), "sgd compute copy", [&](auto c) {
      using G = decltype(g);
      using C = decltype(c);
      if constexpr (!std::is_same_v<G, float> && !std::is_same_v<C, float>) {
        const G* gp = grad.data<G>();
        C* out = compute.data<C>();
        float* buf = momentum_buf.data<float>();
        float* p = param.data<float>();
        const SgdCopyLoops<G, C>& loops = sgd_copy_loops<G, C>(host_cpu_isa());
        if (into_pairs) {  // split by whole blocks
          constexpr int64_t kBlock = kWeightBlock * kWeightBlock;
          const auto update = loops.update_into_pairs;
          parallel_blocks(param.numel() / kBlock, kParallelElements / kBlock,
                          [=](int64_t begin, int64_t end) {
                            const int64_t at = begin * kBlock;
                            update(step, gp + at, buf + at, p + at, out + at, end - begin);
                          });
          return;
        }
        const auto update = loops.update;
        parallel_blocks(param.numel(), kParallelElements, [=](int64_t begin, int64_t end) {
          update(step, gp + begin, buf + begin, p + begin, out + begin, end - begin);
        });
      } else {
        throw std::logic_error("sgd_update_with_copy: f32 reached the 16-bit update");
      }
    });
  });
}

}  // namespace dlb
