#include "runtime/nn/layers/pooling.h"

#include <fmt/format.h>

#include "runtime/core/error.h"

namespace dlb {

Pool2d::Pool2d(PoolMode mode, int64_t kernel, int64_t stride, int64_t padding) {
  if (kernel < 1 || stride < 1 || padding < 0 || 2 * padding > kernel) {
    throw InvalidArgument(fmt::format(
        "pool: kernel {} stride {} padding {} (padding must be at most half the kernel)", kernel,
        stride, padding));
  }
  desc_.mode = mode;
  desc_.kernel_h = desc_.kernel_w = kernel;
  desc_.stride_h = desc_.stride_w = stride;
  desc_.pad_h = desc_.pad_w = padding;
}

std::string_view Pool2d::kind() const {
  return desc_.mode == PoolMode::kMax ? "max_pool2d" : "avg_pool2d";
}

Shape Pool2d::output_shape(const std::vector<Shape>& in) const {
  const Shape& s = in.at(0);
  if (s.rank() != 4) throw InvalidArgument(fmt::format("{} expects NCHW, got {}", kind(), s.str()));
  const int64_t oh = (s[2] + 2 * desc_.pad_h - desc_.kernel_h) / desc_.stride_h + 1;
  const int64_t ow = (s[3] + 2 * desc_.pad_w - desc_.kernel_w) / desc_.stride_w + 1;
  if (s[2] + 2 * desc_.pad_h < desc_.kernel_h || s[3] + 2 * desc_.pad_w < desc_.kernel_w) {
    throw InvalidArgument(fmt::format("{} {}x{} has no output for a {}x{} input", kind(),
                                      desc_.kernel_h, desc_.kernel_w, s[2], s[3]));
  }
  return Shape{s[0], s[1], oh, ow};
}

void Pool2d::require(const Backend& backend, const PrecisionPolicy& policy) const {
  backend.require(Op::kPool, OpTypes::of(policy));
}

// Max pooling on a backend that keeps each output's argmax (Backend::saves_pool_argmax): saved
// by the training forward pass for backward, in the output's shape (int64, as PyTorch's
// indices).
void Pool2d::declare(LayerDeclaration& d) const {
  if (desc_.mode == PoolMode::kMax && d.traits.saves_pool_argmax) {
    d.saved("argmax", output_shape(d.in), DType::kI64);
  }
}

void Pool2d::forward(const LayerContext& ctx, const LayerTensors& own,
                     const std::vector<const Tensor*>& x, Tensor& y) {
  if (ctx.training && own.has("argmax")) {
    ctx.backend.max_pool_forward_argmax(desc_, *x[0], y, own.get("argmax"));
  } else {
    ctx.backend.pool_forward(desc_, *x[0], y);
  }
}

void Pool2d::backward_data(const LayerContext& ctx, const LayerTensors& own,
                           const std::vector<const Tensor*>& x, const Tensor& y, const Tensor& dy,
                           const std::vector<Tensor*>& dx) {
  if (!dx[0]) return;
  if (own.has("argmax")) {
    ctx.backend.max_pool_backward_argmax(desc_, own.get("argmax"), dy, *dx[0]);
  } else {
    ctx.backend.pool_backward(desc_, *x[0], y, dy, *dx[0]);
  }
}

double Pool2d::forward_flops(const std::vector<Shape>& in) const {
  return static_cast<double>(output_shape(in).numel()) * desc_.kernel_h * desc_.kernel_w;
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(int64_t out_h, int64_t out_w) : out_h_(out_h), out_w_(out_w) {
  if (out_h < 1 || out_w < 1) throw InvalidArgument("adaptive_avg_pool2d: output must be >= 1");
}

Shape AdaptiveAvgPool2d::output_shape(const std::vector<Shape>& in) const {
  const Shape& s = in.at(0);
  if (s.rank() != 4) {
    throw InvalidArgument(fmt::format("adaptive_avg_pool2d expects NCHW, got {}", s.str()));
  }
  return Shape{s[0], s[1], out_h_, out_w_};
}

void AdaptiveAvgPool2d::require(const Backend& backend, const PrecisionPolicy& policy) const {
  backend.require(Op::kPool, OpTypes::of(policy));
}

void AdaptiveAvgPool2d::forward(const LayerContext& ctx, const LayerTensors&,
                                const std::vector<const Tensor*>& x, Tensor& y) {
  ctx.backend.adaptive_avg_pool_forward(*x[0], y);
}

void AdaptiveAvgPool2d::backward_data(const LayerContext& ctx, const LayerTensors&,
                                      const std::vector<const Tensor*>&, const Tensor&,
                                      const Tensor& dy, const std::vector<Tensor*>& dx) {
  if (dx[0]) ctx.backend.adaptive_avg_pool_backward(dy, *dx[0]);
}

double AdaptiveAvgPool2d::forward_flops(const std::vector<Shape>& in) const {
  return static_cast<double>(in.at(0).numel());  // every input is summed once
}

std::vector<OpInstance> Pool2d::op_instances(const std::vector<Shape>& in) const {
  OpInstance op;
  op.kind = desc_.mode == PoolMode::kMax ? OpKind::kMaxPool : OpKind::kAvgPool;
  op.in = in.at(0);
  op.pool = desc_;
  return {op};
}

std::vector<OpInstance> AdaptiveAvgPool2d::op_instances(const std::vector<Shape>& in) const {
  OpInstance op;
  op.kind = OpKind::kAdaptiveAvgPool;
  op.in = in.at(0);
  op.out_h = out_h_;
  op.out_w = out_w_;
  return {op};
}

}  // namespace dlb
