#include "runtime/nn/layers/batch_norm.h"

#include <fmt/format.h>

#include "runtime/core/error.h"

namespace dlb {

BatchNorm::BatchNorm(int64_t channels, float eps, float momentum)
    : channels_(channels), eps_(eps), momentum_(momentum) {
  if (channels < 1) throw InvalidArgument("batch_norm: channels must be positive");
}

Shape BatchNorm::output_shape(const std::vector<Shape>& in) const {
  const Shape& s = in.at(0);
  if ((s.rank() != 4 && s.rank() != 2) || s[1] != channels_) {
    throw InvalidArgument(
        fmt::format("batch_norm expects [N, {}, ...], got {}", channels_, s.str()));
  }
  return s;
}

void BatchNorm::declare(LayerDeclaration& d) const {
  // Scale, shift and statistics stay f32 under 16-bit activations, as cuDNN requires.
  const DType stats = d.policy.dtype(TensorRole::kStatistics);
  const Shape c{channels_};
  d.param("weight", c, stats);
  d.param("bias", c, stats);
  d.buffer("running_mean", c, stats);
  d.buffer("running_var", c, stats);
  d.saved("saved mean", c, stats);
  d.saved("saved invstd", c, stats);
  // On the device, as PyTorch's: a step replayed from a captured graph counts its batch too.
  d.buffer("num_batches_tracked", Shape{}, DType::kI64);
}

// Scale, shift and statistics in f32 under 16-bit activations: the dtypes the op really sees.
void BatchNorm::require(const Backend& backend, const PrecisionPolicy& policy) const {
  backend.require(Op::kBatchNorm,
                  OpTypes{policy.math, policy.activations, policy.dtype(TensorRole::kStatistics)});
}

void BatchNorm::plan(const LayerPlanning& p) {
  const Shape& x = p.in.at(0);
  const Layout layout = x.rank() == 4 ? p.backend.activation_layout(p.op_types()) : Layout::kNCHW;
  p.backend.plan_batch_norm({x, p.policy.activations, layout, eps_, relu_});
}

void BatchNorm::setup(LayerSetup& s) {
  const int64_t none = 0;
  s.backend.copy_from_host(&none, s.tensors.get("num_batches_tracked"));
  s.backend.fill(s.tensors.get("weight"), 1.f);
  s.backend.fill(s.tensors.get("bias"), 0.f);
  s.backend.fill(s.tensors.get("running_mean"), 0.f);
  s.backend.fill(s.tensors.get("running_var"), 1.f);
}

void BatchNorm::forward(const LayerContext& ctx, const LayerTensors& own,
                        const std::vector<const Tensor*>& x, Tensor& y) {
  const Tensor &weight = own.get("weight"), &bias = own.get("bias");
  Tensor &mean = own.get("running_mean"), &var = own.get("running_var");
  if (ctx.training) {
    Tensor &save_mean = own.get("saved mean"), &save_invstd = own.get("saved invstd");
    // Recomputed, the statistics are updated with momentum 0: running = 1 * running + 0 * batch,
    // the same bits (Backend::batch_norm_train), and the count is not advanced: the step's
    // first forward pass updated both.
    const float momentum = ctx.recompute ? 0.f : momentum_;
    Tensor* count = ctx.recompute ? nullptr : &own.get("num_batches_tracked");
    ctx.backend.batch_norm_train_counted(relu_, *x[0], weight, bias, mean, var, save_mean,
                                         save_invstd, y, momentum, eps_, count);
  } else {
    ctx.backend.batch_norm_infer(*x[0], weight, bias, mean, var, y, eps_);
    if (relu_) ctx.backend.relu_forward(y, y);  // inference is not timed: no fused op for it
  }
}

// One backend call writes dx, dgamma and dbeta (fused_backward): the graph always passes dx.
void BatchNorm::backward_data(const LayerContext& ctx, const LayerTensors& own,
                              const std::vector<const Tensor*>& x, const Tensor& y,
                              const Tensor& dy, const std::vector<Tensor*>& dx) {
  if (!dx[0]) {
    throw InvalidArgument(
        "batch_norm writes its data and parameter gradients in one pass: "
        "it needs a data-gradient buffer");
  }
  const Tensor &weight = own.get("weight"), &mean = own.get("saved mean"),
               &invstd = own.get("saved invstd");
  if (relu_) {
    ctx.backend.batch_norm_relu_backward(*x[0], y, dy, weight, mean, invstd, *dx[0],
                                         own.grad("weight"), own.grad("bias"));
  } else {
    ctx.backend.batch_norm_backward(*x[0], dy, weight, mean, invstd, *dx[0], own.grad("weight"),
                                    own.grad("bias"));
  }
}

double BatchNorm::forward_flops(const std::vector<Shape>& in) const {
  return 2.0 * static_cast<double>(in.at(0).numel());  // a scale and a shift per element
}

std::vector<OpInstance> BatchNorm::op_instances(const std::vector<Shape>& in) const {
  OpInstance op;
  op.kind = OpKind::kBatchNorm;
  op.in = in.at(0);
  op.eps = eps_;
  op.momentum = momentum_;
  return {op};
}

}  // namespace dlb
