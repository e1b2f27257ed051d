#include "runtime/nn/layers/linear.h"

#include <fmt/format.h>

#include "runtime/core/error.h"

namespace dlb {

Linear::Linear(int64_t in_features, int64_t out_features, Init init)
    : in_(in_features), out_(out_features), init_(init) {
  if (in_ < 1 || out_ < 1) {
    throw InvalidArgument(fmt::format("linear: invalid features {} -> {}", in_, out_));
  }
}

Shape Linear::output_shape(const std::vector<Shape>& in) const {
  const Shape& s = in.at(0);
  if (s.rank() != 2 || s[1] != in_) {
    throw InvalidArgument(fmt::format("linear expects [N, {}], got {}", in_, s.str()));
  }
  return Shape{s[0], out_};
}

void Linear::declare(LayerDeclaration& d) const {
  d.param("weight", {out_, in_}, d.policy.master_weights);
  d.param("bias", {out_}, d.policy.master_weights);
  d.compute_copy("weight", d.policy.compute_weights);
  d.compute_copy("bias", d.policy.compute_weights);
}

void Linear::require(const Backend& backend, const PrecisionPolicy& policy) const {
  backend.require(Op::kMatmul, OpTypes::of(policy));
}

void Linear::setup(LayerSetup& s) {
  math_ = s.op_types().math;
  init_weight_and_bias(s.backend, init_, s.rng, s.tensors.get("weight"), s.tensors.get("bias"));
}

void Linear::forward(const LayerContext& ctx, const LayerTensors& own,
                     const std::vector<const Tensor*>& x, Tensor& y) {
  ctx.backend.matmul(math_, false, true, 1.f, *x[0], own.compute_copy("weight"), 0.f, y);
  ctx.backend.bias_add(own.compute_copy("bias"), y);
}

void Linear::backward_data(const LayerContext& ctx, const LayerTensors& own,
                           const std::vector<const Tensor*>&, const Tensor&, const Tensor& dy,
                           const std::vector<Tensor*>& dx) {
  if (dx[0]) {
    ctx.backend.matmul(math_, false, false, 1.f, dy, own.compute_copy("weight"), 0.f, *dx[0]);
  }
}

void Linear::backward_weights(const LayerContext& ctx, const LayerTensors& own,
                              const std::vector<const Tensor*>& x, const Tensor&,
                              const Tensor& dy) {
  ctx.backend.matmul(math_, true, false, 1.f, dy, *x[0], 0.f, own.grad("weight"));
  ctx.backend.bias_backward(dy, own.grad("bias"));
}

std::vector<OpInstance> Linear::op_instances(const std::vector<Shape>& in) const {
  OpInstance op;
  op.kind = OpKind::kLinear;
  op.in = in.at(0);
  op.features = out_;
  op.bias = true;
  return {op};
}

double Linear::forward_flops(const std::vector<Shape>& in) const {
  return 2.0 * static_cast<double>(in.at(0)[0]) * in_ * out_;
}

}  // namespace dlb
