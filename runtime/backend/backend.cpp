#include "runtime/backend/backend.h"

#include <fmt/format.h>

#include "runtime/core/error.h"
#include "runtime/core/layout_order.h"

namespace dlb {

std::string_view op_name(Op op) {
  switch (op) {
    case Op::kConv:
      return "conv";
    case Op::kMatmul:
      return "matmul";
    case Op::kBatchNorm:
      return "batch_norm";
    case Op::kRelu:
      return "relu";
    case Op::kPool:
      return "pool";
    case Op::kDropout:
      return "dropout";
    case Op::kAdd:
      return "add";
    case Op::kSoftmaxCrossEntropy:
      return "softmax_cross_entropy";
    case Op::kSgd:
      return "sgd";
    case Op::kLossScale:
      return "loss_scale";
  }
  return "?";
}

std::string_view conv_pass_name(ConvPass p) {
  switch (p) {
    case ConvPass::kForward:
      return "forward";
    case ConvPass::kBackwardData:
      return "backward_data";
    case ConvPass::kBackwardFilter:
      return "backward_filter";
  }
  return "?";
}

std::string conv_shape_text(const ConvDesc& d) {
  return fmt::format("{}x{}, {}->{} channels on {}x{}, stride {}, pad {}", d.kernel_h, d.kernel_w,
                     d.in_channels, d.out_channels, d.height, d.width, d.stride_h, d.pad_h);
}

Layout blocked_weight_layout(const ConvDesc& d) {
  const Shape w{d.out_channels, d.in_channels / d.groups, d.kernel_h, d.kernel_w};
  return d.groups == 1 && layout_holds(Layout::kOIhw16i16o, w) ? Layout::kOIhw16i16o
                                                               : Layout::kNCHW;
}

void describe_weights_as_trained(const Backend& backend, bool compute_copy, ConvDesc& d) {
  d.grad_layout = backend.blocks_conv_weights(d.types) ? blocked_weight_layout(d) : Layout::kNCHW;
  d.weight_layout =
      compute_copy ? backend.conv_weight_copy_layout(d.types, d.grad_layout) : d.grad_layout;
}

std::string conv_plan_key(const ConvDesc& d) {
  return fmt::format("{}x{}x{}x{} k{} {}x{}/{}x{} pad {}x{} g{}{} {} {} {} {} w {} dw {}", d.batch,
                     d.in_channels, d.height, d.width, d.out_channels, d.kernel_h, d.kernel_w,
                     d.stride_h, d.stride_w, d.pad_h, d.pad_w, d.groups, d.bias ? " bias" : "",
                     dtype_name(d.types.data), dtype_name(d.types.params),
                     precision_name(d.types.math), layout_name(d.layout),
                     layout_name(d.weight_layout), layout_name(d.grad_layout));
}

std::string_view conv_algo_choice_name(ConvAlgoChoice c) {
  switch (c) {
    case ConvAlgoChoice::kHeuristic:
      return "heuristic";
    case ConvAlgoChoice::kAutotune:
      return "autotune";
    case ConvAlgoChoice::kIm2col:
      return "im2col";
    case ConvAlgoChoice::kOnednn:
      return "onednn";
    case ConvAlgoChoice::kWinograd:
      return "winograd";
    case ConvAlgoChoice::kAuto:
      return "auto";
    case ConvAlgoChoice::kMatmul:
      return "matmul";
    case ConvAlgoChoice::kClassFft:
      return "class:fft";
    case ConvAlgoChoice::kClassWinograd:
      return "class:winograd";
    case ConvAlgoChoice::kClassTensorCore:
      return "class:tensor_core";
    case ConvAlgoChoice::kClassOther:
      return "class:other";
  }
  return "?";
}

std::optional<EngineClass> restricted_class(ConvAlgoChoice c) {
  switch (c) {
    case ConvAlgoChoice::kClassFft:
      return EngineClass::kFft;
    case ConvAlgoChoice::kClassWinograd:
      return EngineClass::kWinograd;
    case ConvAlgoChoice::kClassTensorCore:
      return EngineClass::kTensorCore;
    case ConvAlgoChoice::kClassOther:
      return EngineClass::kOther;
    default:
      return std::nullopt;
  }
}

EngineClass engine_class(const EngineNotes& n) {
  if (n.fft) return EngineClass::kFft;
  if (n.winograd) return EngineClass::kWinograd;
  return n.tensor_core ? EngineClass::kTensorCore : EngineClass::kOther;
}

std::string_view engine_class_name(EngineClass c) {
  switch (c) {
    case EngineClass::kFft:
      return "fft";
    case EngineClass::kWinograd:
      return "winograd";
    case EngineClass::kTensorCore:
      return "tensor_core";
    case EngineClass::kOther:
      return "other";
  }
  return "?";
}

std::optional<ConvAlgoChoice> parse_conv_algo_choice(std::string_view s) {
  for (ConvAlgoChoice c : kConvAlgoChoices) {
    if (conv_algo_choice_name(c) == s) return c;
  }
  return std::nullopt;
}

std::string_view conv_arithmetic_name(ConvArithmetic a) {
  switch (a) {
    case ConvArithmetic::kProducts:
      return "products";
    case ConvArithmetic::kWinogradF4x3:
      return "winograd_f4x3";
    case ConvArithmetic::kUnstatedTransform:
      return "unstated_transform";
  }
  return "?";
}

std::string_view conv_math_name(ConvMath m) { return m == ConvMath::kFast ? "fast" : "strict"; }

std::optional<ConvMath> parse_conv_math(std::string_view s) {
  for (ConvMath m : kConvMaths) {
    if (conv_math_name(m) == s) return m;
  }
  return std::nullopt;
}

std::vector<std::string> engine_note_names(const EngineNotes& n) {
  std::vector<std::string> out;
  const std::pair<bool, const char*> named[] = {
      {n.tensor_core, "tensor_core"},
      {n.down_convert_inputs, "down_convert_inputs"},
      {n.reduced_precision_reduction, "reduced_precision_reduction"},
      {n.nondeterministic, "nondeterministic"},
      {n.fft, "fft"},
      {n.winograd, "winograd"},
      {n.fallback, "fallback"}};
  for (const auto& [set, name] : named) {
    if (set) out.emplace_back(name);
  }
  return out;
}

bool wants_tensor_cores(Precision math) { return math != Precision::kFp32; }

bool lacks_tensor_cores(const PassAlgorithm& a, Precision math) {
  return wants_tensor_cores(math) && a.notes && !a.notes->tensor_core;
}

double ConvDesc::forward_macs() const {
  return static_cast<double>(batch) * out_channels * out_h() * out_w() * (in_channels / groups) *
         kernel_h * kernel_w;
}

OpTypes OpTypes::of(const PrecisionPolicy& policy) {
  return OpTypes{policy.math, policy.activations, policy.compute_weights};
}

std::string op_types_str(const OpTypes& t) {
  return fmt::format("{} ({} data, {} parameters)", precision_name(t.math), dtype_name(t.data),
                     dtype_name(t.params));
}

void Backend::require(Op op, const OpTypes& types) const {
  if (!supports(op, types)) {
    throw Unsupported(fmt::format("the {} backend does not support {} in {}", name(), op_name(op),
                                  op_types_str(types)));
  }
}

void DeviceMemory::cast(const Tensor& src, Tensor& dst) {
  if (src.dtype() != dst.dtype()) {
    throw Unsupported(fmt::format("{}: no conversion from {} to {}", name(),
                                  dtype_name(src.dtype()), dtype_name(dst.dtype())));
  }
  copy(src, dst);
}

Tensor DeviceMemory::empty(const Shape& shape, DType dtype, MemCategory category,
                           std::string_view what, Layout layout) {
  const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  return Tensor(allocator().allocate(bytes, category, what), shape, dtype,
                shape.rank() == 4 ? layout : Layout::kNCHW);
}

void Backend::reserve_workspace(size_t bytes) { workspace(bytes); }

void Backend::release_workspace() {
  if (!workspace_) return;
  workspace_.reset();
  scratch_moved();  // what pointed into it (a captured graph's passes) must not run again
}

void Backend::conv_bias_forward(const ConvPlan& plan, const Tensor& x, const Tensor& w,
                                const Tensor& b, Tensor& y) {
  conv_forward(plan, x, w, y);
  bias_add(b, y);
}

void Backend::conv_relu_forward(const ConvPlan& plan, const Tensor& x, const Tensor& w,
                                const Tensor* b, Tensor& y) {
  if (b) {
    conv_bias_forward(plan, x, w, *b, y);
  } else {
    conv_forward(plan, x, w, y);
  }
  relu_forward(y, y);
}

void Backend::batch_norm_relu_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    Tensor& running_mean, Tensor& running_var, Tensor& save_mean,
                                    Tensor& save_invstd, Tensor& y, float momentum, float eps) {
  batch_norm_train(x, gamma, beta, running_mean, running_var, save_mean, save_invstd, y, momentum,
                   eps);
  relu_forward(y, y);
}

void Backend::batch_norm_relu_backward(const Tensor& x, const Tensor& y, const Tensor& dy,
                                       const Tensor& gamma, const Tensor& save_mean,
                                       const Tensor& save_invstd, Tensor& dx, Tensor& dgamma,
                                       Tensor& dbeta) {
  relu_backward(y, dy, dx);
  batch_norm_backward(x, dx, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
}

Backend::CopyMarks Backend::copy_in(const void* src, Tensor& dst, const Mark& free) {
  (void)free;  // synchronous: everything queued before has run
  const Mark start = clock().mark();
  copy_from_host(src, dst);
  return {start, clock().mark()};
}

Backend::CopyMarks Backend::swap_copy(const Tensor& src, Tensor& dst) {
  const Mark start = clock().mark();  // synchronous: everything queued before has run
  copy(src, dst);
  return {start, clock().mark()};
}

namespace {
[[noreturn]] void no_loss_scaling(std::string_view backend, std::string_view op) {
  throw Unsupported(fmt::format("the {} backend has no loss scaling ({})", backend, op));
}
}  // namespace

void Backend::softmax_cross_entropy_backward_scaled(const Tensor&, const Tensor&, const Tensor&,
                                                    Tensor&) {
  no_loss_scaling(name(), "scaled loss gradient");
}
void Backend::find_non_finite(const Tensor&, Tensor&) { no_loss_scaling(name(), "inf check"); }
void Backend::sgd_update_unscaled(const SgdConfig&, const Tensor&, const Tensor&, Tensor&,
                                  Tensor&) {
  no_loss_scaling(name(), "unscaled update");
}
void Backend::sgd_update_with_copy(const SgdConfig& cfg, const Tensor& grad, const Tensor* scaler,
                                   Tensor& momentum_buf, Tensor& param, Tensor& compute) {
  if (scaler) {
    sgd_update_unscaled(cfg, grad, *scaler, momentum_buf, param);
  } else {
    sgd_update(cfg, grad, momentum_buf, param);
  }
  cast(param, compute);
}
void Backend::batch_norm_train_counted(bool relu, const Tensor& x, const Tensor& gamma,
                                       const Tensor& beta, Tensor& running_mean,
                                       Tensor& running_var, Tensor& save_mean, Tensor& save_invstd,
                                       Tensor& y, float momentum, float eps,
                                       Tensor* num_batches_tracked) {
  if (relu) {
    batch_norm_relu_train(x, gamma, beta, running_mean, running_var, save_mean, save_invstd, y,
                          momentum, eps);
  } else {
    batch_norm_train(x, gamma, beta, running_mean, running_var, save_mean, save_invstd, y, momentum,
                     eps);
  }
  if (num_batches_tracked) increment(*num_batches_tracked);
}

void Backend::sgd_update_group(const SgdConfig& cfg, const std::vector<SgdParamRef>& group,
                               const Tensor* scaler) {
  for (const SgdParamRef& p : group) {
    if (p.compute) {
      sgd_update_with_copy(cfg, *p.grad, scaler, *p.momentum, *p.param, *p.compute);
    } else if (scaler) {
      sgd_update_unscaled(cfg, *p.grad, *scaler, *p.momentum, *p.param);
    } else {
      sgd_update(cfg, *p.grad, *p.momentum, *p.param);
    }
  }
}
void Backend::update_loss_scale(const LossScaleConfig&, Tensor&) {
  no_loss_scaling(name(), "scale update");
}

std::string Backend::capture_unsupported() const {
  return fmt::format(
      "the {} backend runs each op as it is called, so there is no queued work to capture as a "
      "graph (--cuda-graph needs --backend=cuda)",
      name());
}
void Backend::max_pool_forward_argmax(const PoolDesc&, const Tensor&, Tensor&, Tensor&) {
  throw Unsupported(fmt::format("the {} backend keeps no max-pooling argmax", name()));
}
void Backend::max_pool_backward_argmax(const PoolDesc&, const Tensor&, const Tensor&, Tensor&) {
  throw Unsupported(fmt::format("the {} backend keeps no max-pooling argmax", name()));
}

void Backend::begin_capture() { throw Unsupported(capture_unsupported()); }
std::unique_ptr<CapturedWork> Backend::end_capture() { throw Unsupported(capture_unsupported()); }

void* Backend::workspace(size_t bytes) {
  if (!workspace_ || workspace_->bytes() < bytes) {
    workspace_.reset();  // release first so the budget sees only the larger one
    scratch_moved();     // even if the larger one cannot be had: the old one is gone
    workspace_ = allocator().allocate(bytes, MemCategory::kWorkspace, "the shared workspace");
  }
  return workspace_->data();
}

std::shared_ptr<Allocator> make_allocator(std::unique_ptr<MemoryResource> resource,
                                          const BackendOptions& options,
                                          std::unique_ptr<MemoryResource> host) {
  auto a = std::make_shared<Allocator>(std::move(resource), options.memory_budget, std::move(host));
  if (options.memory_guard) a->enable_guard();
  return a;
}

std::string_view backend_kind_name(BackendKind k) {
  return k == BackendKind::kCpu ? "cpu" : "cuda";
}

std::optional<BackendKind> parse_backend_kind(std::string_view s) {
  for (BackendKind k : kBackendKinds) {
    if (backend_kind_name(k) == s) return k;
  }
  return std::nullopt;
}

}  // namespace dlb
