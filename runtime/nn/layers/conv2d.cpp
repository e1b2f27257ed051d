#include "runtime/nn/layers/conv2d.h"

#include <fmt/format.h>

#include "runtime/core/error.h"

namespace dlb {

Conv2d::Conv2d(const Conv2dOptions& o) : o_(o) {
  if (o.in_channels < 1 || o.out_channels < 1 || o.kernel < 1 || o.stride < 1 || o.padding < 0 ||
      o.groups < 1 || o.in_channels % o.groups || o.out_channels % o.groups) {
    throw InvalidArgument(
        fmt::format("conv2d: invalid options in={} out={} kernel={} stride={} padding={} groups={}",
                    o.in_channels, o.out_channels, o.kernel, o.stride, o.padding, o.groups));
  }
}

ConvDesc Conv2d::describe(const Shape& in, const OpTypes& types) const {
  ConvDesc d;
  d.types = types;
  d.batch = in[0];
  d.in_channels = in[1];
  d.height = in[2];
  d.width = in[3];
  d.out_channels = o_.out_channels;
  d.kernel_h = d.kernel_w = o_.kernel;
  d.stride_h = d.stride_w = o_.stride;
  d.pad_h = d.pad_w = o_.padding;
  d.groups = o_.groups;
  d.bias = o_.bias;
  return d;
}

Shape Conv2d::output_shape(const std::vector<Shape>& in) const {
  const Shape& s = in.at(0);
  if (s.rank() != 4 || s[1] != o_.in_channels) {
    throw InvalidArgument(
        fmt::format("conv2d expects [N, {}, H, W], got {}", o_.in_channels, s.str()));
  }
  const ConvDesc d = describe(s);
  if (d.out_h() < 1 || d.out_w() < 1) {
    throw InvalidArgument(fmt::format("conv2d {}x{}/{} has no output for a {}x{} input", o_.kernel,
                                      o_.kernel, o_.stride, s[2], s[3]));
  }
  return Shape{s[0], o_.out_channels, d.out_h(), d.out_w()};
}

Layout Conv2d::weight_layout(bool blocks) const {
  return blocks ? blocked_weight_layout(describe(Shape{1, o_.in_channels, o_.kernel, o_.kernel}))
                : Layout::kNCHW;
}

void Conv2d::declare(LayerDeclaration& d) const {
  const DType master = d.policy.master_weights, compute = d.policy.compute_weights;
  d.param("weight", {o_.out_channels, o_.in_channels / o_.groups, o_.kernel, o_.kernel}, master,
          weight_layout(d.traits.blocks_conv_weights));
  if (o_.bias) d.param("bias", {o_.out_channels}, master);
  d.compute_copy("weight", compute);
  if (o_.bias) d.compute_copy("bias", compute);
  // With its ReLU: dy masked by the output's sign, what the three gradients are computed from,
  // in dy's own bytes where nothing else reads them (Graph::overlay_scratch).
  if (relu_) d.scratch("masked gradient", output_shape(d.in), d.policy.activations, true);
}

void Conv2d::require(const Backend& backend, const PrecisionPolicy& policy) const {
  backend.require(Op::kConv, OpTypes::of(policy));
}

void Conv2d::plan(const LayerPlanning& p) {
  ConvDesc d = describe(p.in.at(0), p.op_types());
  d.layout = p.backend.activation_layout(d.types);  // as the graph stores its tensors
  describe_weights_as_trained(p.backend, p.policy.compute_weights != p.policy.master_weights, d);
  plan_ = p.backend.make_conv_plan(d);
}

void Conv2d::setup(LayerSetup& s) {
  Tensor none;
  init_weight_and_bias(s.backend, o_.init, s.rng, s.tensors.get("weight"),
                       o_.bias ? s.tensors.get("bias") : none);
}

void Conv2d::forward(const LayerContext& ctx, const LayerTensors& own,
                     const std::vector<const Tensor*>& x, Tensor& y) {
  const Tensor& w = own.compute_copy("weight");
  if (relu_) {
    ctx.backend.conv_relu_forward(*plan_, *x[0], w, o_.bias ? &own.compute_copy("bias") : nullptr,
                                  y);
  } else if (o_.bias) {
    ctx.backend.conv_bias_forward(*plan_, *x[0], w, own.compute_copy("bias"), y);
  } else {
    ctx.backend.conv_forward(*plan_, *x[0], w, y);
  }
}

void Conv2d::backward_data(const LayerContext& ctx, const LayerTensors& own,
                           const std::vector<const Tensor*>& x, const Tensor& y, const Tensor& dy,
                           const std::vector<Tensor*>& dx) {
  if (!relu_) {
    if (dx[0]) ctx.backend.conv_backward_data(*plan_, dy, own.compute_copy("weight"), *dx[0]);
    return;
  }
  // The ReLU's backward into the pass's scratch (dy's bytes, where the graph found nothing else
  // reads them; under a residual add that passes dy on, its own), then every gradient from it.
  Tensor& masked = own.get("masked gradient");
  ctx.backend.relu_backward(y, dy, masked);
  gradients(ctx, own, *x[0], masked, dx[0]);
}

void Conv2d::gradients(const LayerContext& ctx, const LayerTensors& own, const Tensor& x,
                       const Tensor& dy, Tensor* dx) {
  if (dx) ctx.backend.conv_backward_data(*plan_, dy, own.compute_copy("weight"), *dx);
  ctx.backend.conv_backward_filter(*plan_, x, dy, own.grad("weight"));
  if (o_.bias) ctx.backend.bias_backward(dy, own.grad("bias"));
}

void Conv2d::backward_weights(const LayerContext& ctx, const LayerTensors& own,
                              const std::vector<const Tensor*>& x, const Tensor&,
                              const Tensor& dy) {
  if (relu_) throw InvalidArgument("conv2d with its ReLU has one backward pass: backward_data");
  gradients(ctx, own, *x[0], dy, nullptr);
}

std::vector<OpInstance> Conv2d::op_instances(const std::vector<Shape>& in) const {
  OpInstance op;
  op.kind = OpKind::kConv;
  op.in = in.at(0);
  op.conv = describe(op.in);
  op.bias = o_.bias;
  return {op};
}

double Conv2d::forward_flops(const std::vector<Shape>& in) const {
  return 2.0 * describe(in.at(0)).forward_macs();
}

}  // namespace dlb
