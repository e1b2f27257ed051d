#include "runtime/nn/layers/batch_norm.h"

#include <fmt/format.h>

#include <cstring>

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

void BatchNorm::setup(LayerSetup& s) {
  const DType stats = s.policy.dtype(TensorRole::kStatistics);
  s.backend.require(Op::kBatchNorm, OpTypes{s.policy.math, s.policy.activations, stats});
  weight_.value = s.tensors.get("weight");
  bias_.value = s.tensors.get("bias");
  running_mean_ = s.tensors.get("running_mean");
  running_var_ = s.tensors.get("running_var");
  save_mean_ = s.tensors.get("saved mean");
  save_invstd_ = s.tensors.get("saved invstd");
  num_batches_tracked_ = s.tensors.get("num_batches_tracked");
  const int64_t none = 0;
  s.backend.copy_from_host(&none, num_batches_tracked_);
  s.backend.fill(weight_.value, 1.f);
  s.backend.fill(bias_.value, 0.f);
  s.backend.fill(running_mean_, 0.f);
  s.backend.fill(running_var_, 1.f);
}

void BatchNorm::forward(const LayerContext& ctx, const std::vector<const Tensor*>& x, Tensor& y) {
  if (ctx.training && relu_) {
    ctx.backend.batch_norm_relu_train(*x[0], weight_.value, bias_.value, running_mean_,
                                      running_var_, save_mean_, save_invstd_, y, momentum_, eps_);
    ctx.backend.increment(num_batches_tracked_);
  } else if (ctx.training) {
    ctx.backend.batch_norm_train(*x[0], weight_.value, bias_.value, running_mean_, running_var_,
                                 save_mean_, save_invstd_, y, momentum_, eps_);
    ctx.backend.increment(num_batches_tracked_);
  } else {
    ctx.backend.batch_norm_infer(*x[0], weight_.value, bias_.value, running_mean_, running_var_, y,
                                 eps_);
    if (relu_) ctx.backend.relu_forward(y, y);  // inference is not timed: no fused op for it
  }
}

// One backend call writes dx, dgamma and dbeta (fused_backward): the graph always passes dx.
void BatchNorm::backward_data(const LayerContext& ctx, const std::vector<const Tensor*>& x,
                              const Tensor& y, const Tensor& dy, const std::vector<Tensor*>& dx) {
  if (!dx[0]) {
    throw InvalidArgument(
        "batch_norm writes its data and parameter gradients in one pass: "
        "it needs a data-gradient buffer");
  }
  if (relu_) {
    ctx.backend.batch_norm_relu_backward(*x[0], y, dy, weight_.value, save_mean_, save_invstd_,
                                         *dx[0], weight_.grad, bias_.grad);
  } else {
    ctx.backend.batch_norm_backward(*x[0], dy, weight_.value, save_mean_, save_invstd_, *dx[0],
                                    weight_.grad, bias_.grad);
  }
}

void BatchNorm::save_state(Backend& backend, const std::string& prefix, StateDict& out) {
  Layer::save_state(backend, prefix, out);
  out[prefix + "running_mean"] = to_host(backend, running_mean_);
  out[prefix + "running_var"] = to_host(backend, running_var_);
  out[prefix + "num_batches_tracked"] = to_host(backend, num_batches_tracked_);
}

void BatchNorm::load_state(Backend& backend, const std::string& prefix, const StateDict& in,
                           std::vector<std::string>& used) {
  Layer::load_state(backend, prefix, in, used);
  load_entry(backend, in, prefix + "running_mean", running_mean_, used);
  load_entry(backend, in, prefix + "running_var", running_var_, used);
  const std::string key = prefix + "num_batches_tracked";
  auto it = in.find(key);
  if (it == in.end()) throw InvalidArgument(fmt::format("missing tensor '{}'", key));
  if (it->second.dtype != DType::kI64 || it->second.shape.numel() != 1) {
    throw InvalidArgument(fmt::format("{}: expected one int64 value", key));
  }
  backend.copy_from_host(it->second.bytes.data(), num_batches_tracked_);
  used.push_back(key);
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
