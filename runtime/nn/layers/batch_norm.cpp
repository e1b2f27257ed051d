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

void BatchNorm::setup(Backend& backend, const std::vector<Shape>&, Rng&) {
  const Shape c{channels_};
  auto make = [&](MemCategory cat, const char* what) {
    return backend.empty(c, DType::kF32, cat, what);
  };
  weight_.value = make(MemCategory::kWeights, "bn weight");
  bias_.value = make(MemCategory::kWeights, "bn bias");
  running_mean_ = make(MemCategory::kWeights, "bn running mean");
  running_var_ = make(MemCategory::kWeights, "bn running var");
  save_mean_ = make(MemCategory::kActivations, "bn saved mean");
  save_invstd_ = make(MemCategory::kActivations, "bn saved invstd");
  backend.fill(weight_.value, 1.f);
  backend.fill(bias_.value, 0.f);
  backend.fill(running_mean_, 0.f);
  backend.fill(running_var_, 1.f);
}

void BatchNorm::forward(const LayerContext& ctx, const std::vector<const Tensor*>& x, Tensor& y) {
  if (ctx.training) {
    ctx.backend.batch_norm_train(*x[0], weight_.value, bias_.value, running_mean_, running_var_,
                                 save_mean_, save_invstd_, y, momentum_, eps_);
    ++num_batches_tracked_;
    grads_ready_ = false;
  } else {
    ctx.backend.batch_norm_infer(*x[0], weight_.value, bias_.value, running_mean_, running_var_, y,
                                 eps_);
  }
}

void BatchNorm::compute_gradients(const LayerContext& ctx, const Tensor& x, const Tensor& dy,
                                  Tensor& dx) {
  ctx.backend.batch_norm_backward(x, dy, weight_.value, save_mean_, save_invstd_, dx, weight_.grad,
                                  bias_.grad);
  grads_ready_ = true;
}

void BatchNorm::backward_data(const LayerContext& ctx, const std::vector<const Tensor*>& x,
                              const Tensor&, const Tensor& dy, const std::vector<Tensor*>& dx) {
  if (dx[0]) compute_gradients(ctx, *x[0], dy, *dx[0]);
}

void BatchNorm::backward_weights(const LayerContext& ctx, const std::vector<const Tensor*>& x,
                                 const Tensor&, const Tensor& dy) {
  if (grads_ready_) return;
  if (!spare_dx_.defined()) {
    spare_dx_ = ctx.backend.empty(x[0]->shape(), DType::kF32, MemCategory::kActivations,
                                  "batch norm input gradient (unused)");
  }
  compute_gradients(ctx, *x[0], dy, spare_dx_);
}

void BatchNorm::save_state(Backend& backend, const std::string& prefix, StateDict& out) {
  Layer::save_state(backend, prefix, out);
  out[prefix + "running_mean"] = to_host(backend, running_mean_);
  out[prefix + "running_var"] = to_host(backend, running_var_);
  HostTensor n{DType::kI64, Shape{}, std::vector<uint8_t>(sizeof(int64_t))};
  std::memcpy(n.bytes.data(), &num_batches_tracked_, sizeof(int64_t));
  out[prefix + "num_batches_tracked"] = std::move(n);
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
  std::memcpy(&num_batches_tracked_, it->second.bytes.data(), sizeof(int64_t));
  used.push_back(key);
}

double BatchNorm::forward_flops(const std::vector<Shape>& in) const {
  return 2.0 * static_cast<double>(in.at(0).numel());  // a scale and a shift per element
}

}  // namespace dlb
