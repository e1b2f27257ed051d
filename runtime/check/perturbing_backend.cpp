#include "runtime/check/perturbing_backend.h"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/half.h"

namespace dlb {
namespace {

struct Target {
  OpKind kind;
  CheckPass pass;
};
constexpr Target kTargets[] = {
    {OpKind::kConv, CheckPass::kForward},         {OpKind::kConv, CheckPass::kBackwardData},
    {OpKind::kConv, CheckPass::kBackwardWeights}, {OpKind::kLinear, CheckPass::kForward},
    {OpKind::kBatchNorm, CheckPass::kForward},    {OpKind::kBatchNorm, CheckPass::kBackward},
    {OpKind::kMaxPool, CheckPass::kBackwardData}, {OpKind::kSgd, CheckPass::kUpdate},
};

std::string target_name(const Target& t) {
  return fmt::format("{}.{}", op_kind_name(t.kind), check_pass_name(t.pass));
}

}  // namespace

void PerturbingBackend::check_target(std::string_view target) {
  std::string known;
  for (const Target& t : kTargets) {
    if (target_name(t) == target) return;
    known += (known.empty() ? "" : ", ") + target_name(t);
  }
  throw InvalidArgument(fmt::format("--perturb={}: not a pass it can break ({})", target, known));
}

PerturbingBackend::PerturbingBackend(std::unique_ptr<Backend> inner, std::string_view target)
    : DelegatingBackend(std::move(inner)) {
  check_target(target);
  for (const Target& t : kTargets) {
    if (target_name(t) == target) kind_ = t.kind, pass_ = t.pass;
  }
  name_ = fmt::format("{} with {} perturbed", DelegatingBackend::inner().name(), target);
}

void PerturbingBackend::perturb(OpKind kind, CheckPass pass, Tensor& t) {
  if (kind != kind_ || pass != pass_ || t.numel() == 0) return;
  std::vector<uint8_t> bytes(t.bytes());
  copy_to_host(t, bytes.data());
  std::vector<float> f(static_cast<size_t>(t.numel()));
  dtype_to_floats(bytes.data(), t.numel(), t.dtype(), f.data());
  float& v = f[f.size() / 2];
  v += 0.01f * std::fabs(v) + 1e-3f;
  floats_to_dtype(f.data(), t.numel(), t.dtype(), bytes.data());
  copy_from_host(bytes.data(), t);
}

void PerturbingBackend::conv_forward(const ConvPlan& p, const Tensor& x, const Tensor& w,
                                     Tensor& y) {
  DelegatingBackend::conv_forward(p, x, w, y);
  perturb(OpKind::kConv, CheckPass::kForward, y);
}
void PerturbingBackend::conv_bias_forward(const ConvPlan& p, const Tensor& x, const Tensor& w,
                                          const Tensor& b, Tensor& y) {
  inner().conv_bias_forward(p, x, w, b, y);
  perturb(OpKind::kConv, CheckPass::kForward, y);
}
void PerturbingBackend::conv_relu_forward(const ConvPlan& p, const Tensor& x, const Tensor& w,
                                          const Tensor* b, Tensor& y) {
  inner().conv_relu_forward(p, x, w, b, y);
  perturb(OpKind::kConv, CheckPass::kForward, y);
}
void PerturbingBackend::batch_norm_relu_train(const Tensor& x, const Tensor& g, const Tensor& b,
                                              Tensor& rm, Tensor& rv, Tensor& sm, Tensor& si,
                                              Tensor& y, float mo, float eps) {
  inner().batch_norm_relu_train(x, g, b, rm, rv, sm, si, y, mo, eps);
  perturb(OpKind::kBatchNorm, CheckPass::kForward, y);
}
void PerturbingBackend::batch_norm_relu_backward(const Tensor& x, const Tensor& y, const Tensor& dy,
                                                 const Tensor& g, const Tensor& sm,
                                                 const Tensor& si, Tensor& dx, Tensor& dg,
                                                 Tensor& db) {
  inner().batch_norm_relu_backward(x, y, dy, g, sm, si, dx, dg, db);
  perturb(OpKind::kBatchNorm, CheckPass::kBackward, dg);
}
void PerturbingBackend::sgd_update_unscaled(const SgdConfig& c, const Tensor& g, const Tensor& s,
                                            Tensor& m, Tensor& p) {
  inner().sgd_update_unscaled(c, g, s, m, p);
  perturb(OpKind::kSgd, CheckPass::kUpdate, p);
}
void PerturbingBackend::sgd_update_with_copy(const SgdConfig& c, const Tensor& g, const Tensor* s,
                                             Tensor& m, Tensor& p, Tensor& compute) {
  inner().sgd_update_with_copy(c, g, s, m, p, compute);
  perturb(OpKind::kSgd, CheckPass::kUpdate, p);
}
void PerturbingBackend::sgd_update_group(const SgdConfig& c, const std::vector<SgdParamRef>& group,
                                         const Tensor* s) {
  inner().sgd_update_group(c, group, s);
  for (const SgdParamRef& ref : group) perturb(OpKind::kSgd, CheckPass::kUpdate, *ref.param);
}
void PerturbingBackend::batch_norm_train_counted(bool relu, const Tensor& x, const Tensor& g,
                                                 const Tensor& b, Tensor& rm, Tensor& rv,
                                                 Tensor& sm, Tensor& si, Tensor& y, float mo,
                                                 float eps, Tensor* num_batches_tracked) {
  inner().batch_norm_train_counted(relu, x, g, b, rm, rv, sm, si, y, mo, eps, num_batches_tracked);
  perturb(OpKind::kBatchNorm, CheckPass::kForward, y);
}
void PerturbingBackend::max_pool_forward_argmax(const PoolDesc& p, const Tensor& x, Tensor& y,
                                                Tensor& argmax) {
  inner().max_pool_forward_argmax(p, x, y, argmax);
}
void PerturbingBackend::max_pool_backward_argmax(const PoolDesc& p, const Tensor& argmax,
                                                 const Tensor& dy, Tensor& dx) {
  inner().max_pool_backward_argmax(p, argmax, dy, dx);
  perturb(OpKind::kMaxPool, CheckPass::kBackwardData, dx);
}
void PerturbingBackend::conv_backward_data(const ConvPlan& p, const Tensor& dy, const Tensor& w,
                                           Tensor& dx) {
  DelegatingBackend::conv_backward_data(p, dy, w, dx);
  perturb(OpKind::kConv, CheckPass::kBackwardData, dx);
}
void PerturbingBackend::conv_backward_filter(const ConvPlan& p, const Tensor& x, const Tensor& dy,
                                             Tensor& dw) {
  DelegatingBackend::conv_backward_filter(p, x, dy, dw);
  perturb(OpKind::kConv, CheckPass::kBackwardWeights, dw);
}
void PerturbingBackend::bias_add(const Tensor& b, Tensor& y) {
  DelegatingBackend::bias_add(b, y);
  if (y.shape().rank() == 2) perturb(OpKind::kLinear, CheckPass::kForward, y);  // not a conv's
}
void PerturbingBackend::batch_norm_train(const Tensor& x, const Tensor& g, const Tensor& b,
                                         Tensor& rm, Tensor& rv, Tensor& sm, Tensor& si, Tensor& y,
                                         float mo, float eps) {
  DelegatingBackend::batch_norm_train(x, g, b, rm, rv, sm, si, y, mo, eps);
  perturb(OpKind::kBatchNorm, CheckPass::kForward, y);
}
void PerturbingBackend::batch_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& g,
                                            const Tensor& sm, const Tensor& si, Tensor& dx,
                                            Tensor& dg, Tensor& db) {
  DelegatingBackend::batch_norm_backward(x, dy, g, sm, si, dx, dg, db);
  perturb(OpKind::kBatchNorm, CheckPass::kBackward, dg);
}
void PerturbingBackend::pool_backward(const PoolDesc& p, const Tensor& x, const Tensor& y,
                                      const Tensor& dy, Tensor& dx) {
  DelegatingBackend::pool_backward(p, x, y, dy, dx);
  if (p.mode == PoolMode::kMax) perturb(OpKind::kMaxPool, CheckPass::kBackwardData, dx);
}
void PerturbingBackend::sgd_update(const SgdConfig& c, const Tensor& g, Tensor& m, Tensor& p) {
  DelegatingBackend::sgd_update(c, g, m, p);
  perturb(OpKind::kSgd, CheckPass::kUpdate, p);
}

}  // namespace dlb
