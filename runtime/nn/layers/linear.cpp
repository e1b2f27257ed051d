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

void Linear::setup(LayerSetup& s) {
  s.backend.require(Op::kMatmul, s.op_types());
  math_ = s.op_types().math;
  weight_.value = s.tensors.get("weight");
  bias_.value = s.tensors.get("bias");
  init_weight_and_bias(s.backend, init_, s.rng, weight_.value, bias_.value);
  weight_.compute = s.tensors.compute_copy("weight");
  bias_.compute = s.tensors.compute_copy("bias");
}

void Linear::forward(const LayerContext& ctx, const std::vector<const Tensor*>& x, Tensor& y) {
  ctx.backend.matmul(math_, false, true, 1.f, *x[0], weight_.for_compute(), 0.f, y);
  ctx.backend.bias_add(bias_.for_compute(), y);
}

void Linear::backward_data(const LayerContext& ctx, const std::vector<const Tensor*>&,
                           const Tensor&, const Tensor& dy, const std::vector<Tensor*>& dx) {
  if (dx[0]) {
    ctx.backend.matmul(math_, false, false, 1.f, dy, weight_.for_compute(), 0.f, *dx[0]);
  }
}

void Linear::backward_weights(const LayerContext& ctx, const std::vector<const Tensor*>& x,
                              const Tensor&, const Tensor& dy) {
  ctx.backend.matmul(math_, true, false, 1.f, dy, *x[0], 0.f, weight_.grad);
  ctx.backend.bias_backward(dy, bias_.grad);
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
