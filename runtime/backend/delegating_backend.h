// A backend that runs every op on another (by default a CPU backend of its own, with memory from
// an allocator of its own): a subclass overrides only what it watches or changes. The composed
// ops (conv_bias_forward, the fused batch norm + ReLU, sgd_update_with_copy) are not forwarded:
// they run as the Backend's defaults over the forwarded ops, so a double sees their parts. The
// tests' doubles are ones (stream_order_test.cpp logs the order of work; fusion_test.cpp claims the
// fused batch norm + ReLU, which the Backend's defaults then compose from the inner ops;
// capture_test.cpp defers ops through dispatch()); so is the op checker's perturbing backend
// (runtime/check/perturbing_backend.h), which breaks one op on purpose.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "runtime/backend/cpu/cpu_backend.h"

namespace dlb {

class DelegatingBackend : public Backend {
 public:
  DelegatingBackend()
      : Backend(std::make_shared<Allocator>(make_host_memory_resource())),
        inner_(std::make_unique<CpuBackend>(BackendOptions{})) {}
  // Over `inner`, sharing its memory: tensors this backend makes are the inner backend's.
  explicit DelegatingBackend(std::unique_ptr<Backend> inner)
      : Backend(inner->allocator().shared_from_this()), inner_(std::move(inner)) {}
  std::string_view name() const override { return "delegating"; }
  std::map<std::string, std::string> environment() const override { return {}; }
  bool supports(Op op, const OpTypes& t) const override { return inner_->supports(op, t); }
  ProductArithmetic matmul_arithmetic(const OpTypes& t) const override {
    return inner_->matmul_arithmetic(t);
  }
  Layout activation_layout(const OpTypes& t) const override { return inner_->activation_layout(t); }
  bool blocks_conv_weights(const OpTypes& t) const override {
    return inner_->blocks_conv_weights(t);
  }
  Layout conv_weight_copy_layout(const OpTypes& t, Layout stored) const override {
    return inner_->conv_weight_copy_layout(t, stored);
  }
  const Clock& clock() const override { return inner_->clock(); }
  StreamRef stream() const override { return inner_->stream(); }

  void copy_from_host(const void* src, Tensor& dst) override { inner_->copy_from_host(src, dst); }
  void copy_to_host(const Tensor& src, void* dst) override { inner_->copy_to_host(src, dst); }
  void copy(const Tensor& src, Tensor& dst) override {
    dispatch("copy", [=]() mutable { inner_->copy(src, dst); });
  }
  void fill(Tensor& t, float v) override {
    dispatch("fill", [=]() mutable { inner_->fill(t, v); });
  }
  void synchronize() override { inner_->synchronize(); }
  std::unique_ptr<ConvPlan> make_conv_plan(const ConvDesc& d) override {
    return inner_->make_conv_plan(d);
  }
  void plan_batch_norm(const BatchNormShape& bn) override { inner_->plan_batch_norm(bn); }
  void conv_forward(const ConvPlan& p, const Tensor& x, const Tensor& w, Tensor& y) override {
    dispatch("conv_forward", [=, &p]() mutable { inner_->conv_forward(p, x, w, y); });
  }
  void conv_backward_data(const ConvPlan& p, const Tensor& dy, const Tensor& w,
                          Tensor& dx) override {
    dispatch("conv_backward_data", [=, &p]() mutable { inner_->conv_backward_data(p, dy, w, dx); });
  }
  void conv_backward_filter(const ConvPlan& p, const Tensor& x, const Tensor& dy,
                            Tensor& dw) override {
    dispatch("conv_backward_filter",
             [=, &p]() mutable { inner_->conv_backward_filter(p, x, dy, dw); });
  }
  void bias_add(const Tensor& b, Tensor& y) override {
    dispatch("bias_add", [=]() mutable { inner_->bias_add(b, y); });
  }
  void bias_backward(const Tensor& dy, Tensor& db) override {
    dispatch("bias_backward", [=]() mutable { inner_->bias_backward(dy, db); });
  }
  void matmul(Precision m, bool ta, bool tb, float alpha, const Tensor& a, const Tensor& b,
              float beta, Tensor& c) override {
    dispatch("matmul", [=]() mutable { inner_->matmul(m, ta, tb, alpha, a, b, beta, c); });
  }
  void batch_norm_train(const Tensor& x, const Tensor& g, const Tensor& b, Tensor& rm, Tensor& rv,
                        Tensor& sm, Tensor& si, Tensor& y, float mo, float eps) override {
    dispatch("batch_norm_train",
             [=]() mutable { inner_->batch_norm_train(x, g, b, rm, rv, sm, si, y, mo, eps); });
  }
  void batch_norm_infer(const Tensor& x, const Tensor& g, const Tensor& b, const Tensor& rm,
                        const Tensor& rv, Tensor& y, float eps) override {
    dispatch("batch_norm_infer",
             [=]() mutable { inner_->batch_norm_infer(x, g, b, rm, rv, y, eps); });
  }
  void batch_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& g, const Tensor& sm,
                           const Tensor& si, Tensor& dx, Tensor& dg, Tensor& db) override {
    dispatch("batch_norm_backward",
             [=]() mutable { inner_->batch_norm_backward(x, dy, g, sm, si, dx, dg, db); });
  }
  void relu_forward(const Tensor& x, Tensor& y) override {
    dispatch("relu_forward", [=]() mutable { inner_->relu_forward(x, y); });
  }
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) override {
    dispatch("relu_backward", [=]() mutable { inner_->relu_backward(y, dy, dx); });
  }
  void pool_forward(const PoolDesc& p, const Tensor& x, Tensor& y) override {
    dispatch("pool_forward", [=]() mutable { inner_->pool_forward(p, x, y); });
  }
  void pool_backward(const PoolDesc& p, const Tensor& x, const Tensor& y, const Tensor& dy,
                     Tensor& dx) override {
    dispatch("pool_backward", [=]() mutable { inner_->pool_backward(p, x, y, dy, dx); });
  }
  void adaptive_avg_pool_forward(const Tensor& x, Tensor& y) override {
    dispatch("adaptive_avg_pool_forward",
             [=]() mutable { inner_->adaptive_avg_pool_forward(x, y); });
  }
  void adaptive_avg_pool_backward(const Tensor& dy, Tensor& dx) override {
    dispatch("adaptive_avg_pool_backward",
             [=]() mutable { inner_->adaptive_avg_pool_backward(dy, dx); });
  }
  void dropout_forward(const Tensor& x, float p, const DropoutSeed& s, Tensor& m,
                       Tensor& y) override {
    // The counter's tensor by value, as a graph holds its address, not the caller's object.
    const Tensor step = s.step ? *s.step : Tensor();
    const uint64_t base = s.base;
    dispatch("dropout_forward", [=]() mutable {
      inner_->dropout_forward(x, p, DropoutSeed{base, step.defined() ? &step : nullptr}, m, y);
    });
  }
  void dropout_backward(const Tensor& dy, const Tensor& m, Tensor& dx) override {
    dispatch("dropout_backward", [=]() mutable { inner_->dropout_backward(dy, m, dx); });
  }
  void add(const Tensor& a, const Tensor& b, Tensor& y) override {
    dispatch("add", [=]() mutable { inner_->add(a, b, y); });
  }
  void accumulate(const Tensor& x, Tensor& y) override {
    dispatch("accumulate", [=]() mutable { inner_->accumulate(x, y); });
  }
  void softmax_cross_entropy(const Tensor& z, const Tensor& l, Tensor& p, Tensor& loss) override {
    dispatch("softmax_cross_entropy",
             [=]() mutable { inner_->softmax_cross_entropy(z, l, p, loss); });
  }
  void softmax_cross_entropy_backward(const Tensor& p, const Tensor& l, Tensor& dz) override {
    dispatch("softmax_cross_entropy_backward",
             [=]() mutable { inner_->softmax_cross_entropy_backward(p, l, dz); });
  }
  void sgd_update(const SgdConfig& c, const Tensor& g, Tensor& m, Tensor& p) override {
    dispatch("sgd_update", [=]() mutable { inner_->sgd_update(c, g, m, p); });
  }
  void cast(const Tensor& src, Tensor& dst) override {
    dispatch("cast", [=]() mutable { inner_->cast(src, dst); });
  }
  void softmax_cross_entropy_backward_scaled(const Tensor& p, const Tensor& l, const Tensor& s,
                                             Tensor& dz) override {
    dispatch("softmax_cross_entropy_backward_scaled",
             [=]() mutable { inner_->softmax_cross_entropy_backward_scaled(p, l, s, dz); });
  }
  void find_non_finite(const Tensor& g, Tensor& s) override {
    dispatch("find_non_finite", [=]() mutable { inner_->find_non_finite(g, s); });
  }
  void sgd_update_unscaled(const SgdConfig& c, const Tensor& g, const Tensor& s, Tensor& m,
                           Tensor& p) override {
    dispatch("sgd_update_unscaled", [=]() mutable { inner_->sgd_update_unscaled(c, g, s, m, p); });
  }
  void increment(Tensor& counter) override {
    dispatch("increment", [=]() mutable { inner_->increment(counter); });
  }
  void update_loss_scale(const LossScaleConfig& c, Tensor& s) override {
    dispatch("update_loss_scale", [=]() mutable { inner_->update_loss_scale(c, s); });
  }

 protected:
  // Every op runs through here, with its name (the Backend method's): now, unless a double defers
  // it (capture_test.cpp records the ops of a captured step and replays them) or counts it
  // (step_launches_test.cpp). The op holds its tensors by value (the same
  // memory) and its other arguments as they were at the call, as a CUDA graph's kernels do.
  virtual void dispatch(const char* name, std::function<void()> op) {
    (void)name;
    op();
  }
  Backend& inner() { return *inner_; }
  const Backend& inner() const { return *inner_; }

 private:
  std::unique_ptr<Backend> inner_;
};

}  // namespace dlb
