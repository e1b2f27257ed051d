#include "runtime/nn/layers/elementwise.h"

#include <fmt/format.h>

#include "runtime/core/error.h"

namespace dlb {

void Relu::require(const Backend& backend, const PrecisionPolicy& policy) const {
  backend.require(Op::kRelu, OpTypes::of(policy));
}

void Relu::forward(const LayerContext& ctx, const LayerTensors&,
                   const std::vector<const Tensor*>& x, Tensor& y) {
  ctx.backend.relu_forward(*x[0], y);
}

void Relu::backward_data(const LayerContext& ctx, const LayerTensors&,
                         const std::vector<const Tensor*>&, const Tensor& y, const Tensor& dy,
                         const std::vector<Tensor*>& dx) {
  if (dx[0]) ctx.backend.relu_backward(y, dy, *dx[0]);
}

double Relu::forward_flops(const std::vector<Shape>& in) const {
  return static_cast<double>(in.at(0).numel());
}

Dropout::Dropout(float p) : p_(p) {
  if (!(p >= 0.f && p < 1.f)) {
    throw InvalidArgument(fmt::format("dropout probability {} is outside [0, 1)", p));
  }
}

void Dropout::declare(LayerDeclaration& d) const {
  if (p_ > 0.f) d.saved("mask", d.in.at(0), d.policy.activations);
}

void Dropout::require(const Backend& backend, const PrecisionPolicy& policy) const {
  backend.require(Op::kDropout, OpTypes::of(policy));
}

void Dropout::setup(LayerSetup& s) {
  stream_ = s.rng.next_u64();  // the layer's generator: a graph forks one per node
}

void Dropout::forward(const LayerContext& ctx, const LayerTensors& own,
                      const std::vector<const Tensor*>& x, Tensor& y) {
  active_ = ctx.training && p_ > 0.f;
  if (active_) {
    ctx.backend.dropout_forward(*x[0], p_, DropoutSeed{ctx.seed.base + stream_, ctx.seed.step},
                                own.get("mask"), y);
  } else {
    ctx.backend.copy(*x[0], y);
  }
}

void Dropout::backward_data(const LayerContext& ctx, const LayerTensors& own,
                            const std::vector<const Tensor*>&, const Tensor&, const Tensor& dy,
                            const std::vector<Tensor*>& dx) {
  if (!dx[0]) return;
  if (active_) {
    ctx.backend.dropout_backward(dy, own.get("mask"), *dx[0]);
  } else {
    ctx.backend.copy(dy, *dx[0]);
  }
}

double Dropout::forward_flops(const std::vector<Shape>& in) const {
  return p_ > 0.f ? static_cast<double>(in.at(0).numel()) : 0.0;
}

Shape Add::output_shape(const std::vector<Shape>& in) const {
  if (in.size() != 2 || in[0] != in[1]) {
    throw InvalidArgument(fmt::format("add needs two inputs of one shape, got {} and {}",
                                      in.at(0).str(), in.size() > 1 ? in[1].str() : "none"));
  }
  return in[0];
}

void Add::require(const Backend& backend, const PrecisionPolicy& policy) const {
  backend.require(Op::kAdd, OpTypes::of(policy));
}

void Add::forward(const LayerContext& ctx, const LayerTensors&, const std::vector<const Tensor*>& x,
                  Tensor& y) {
  ctx.backend.add(*x[0], *x[1], y);
}

void Add::backward_data(const LayerContext& ctx, const LayerTensors&,
                        const std::vector<const Tensor*>&, const Tensor&, const Tensor& dy,
                        const std::vector<Tensor*>& dx) {
  for (Tensor* d : dx)
    if (d) ctx.backend.copy(dy, *d);
}

double Add::forward_flops(const std::vector<Shape>& in) const {
  return static_cast<double>(in.at(0).numel());
}

Shape Flatten::output_shape(const std::vector<Shape>& in) const {
  const Shape& s = in.at(0);
  return Shape{s[0], s.numel() / s[0]};
}

void Flatten::forward(const LayerContext& ctx, const LayerTensors&,
                      const std::vector<const Tensor*>& x, Tensor& y) {
  ctx.backend.copy(*x[0], y);
}

void Flatten::backward_data(const LayerContext& ctx, const LayerTensors&,
                            const std::vector<const Tensor*>&, const Tensor&, const Tensor& dy,
                            const std::vector<Tensor*>& dx) {
  if (dx[0]) ctx.backend.copy(dy, *dx[0]);
}

namespace {
OpInstance shaped(OpKind kind, const Shape& in) {
  OpInstance op;
  op.kind = kind;
  op.in = in;
  return op;
}
}  // namespace

std::vector<OpInstance> Relu::op_instances(const std::vector<Shape>& in) const {
  return {shaped(OpKind::kRelu, in.at(0))};
}

// A dropout of p = 0 runs no op (forward copies, as PyTorch's identity).
std::vector<OpInstance> Dropout::op_instances(const std::vector<Shape>& in) const {
  if (p_ == 0.f) return {};
  OpInstance op = shaped(OpKind::kDropout, in.at(0));
  op.p = p_;
  return {op};
}

// The sum, and the accumulation of a fork's gradient, which a residual's input needs.
std::vector<OpInstance> Add::op_instances(const std::vector<Shape>& in) const {
  return {shaped(OpKind::kAdd, in.at(0))};
}

}  // namespace dlb
