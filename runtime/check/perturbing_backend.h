// A deliberately broken backend, for testing the op checker (dlbench check-ops --perturb, a
// hidden flag): it runs every op on an inner backend and then moves one element of one pass's
// output by 1% of its magnitude (and 1e-3), more than any bound allows even in bf16. A checker
// that passes it is blind.
#pragma once
#include <memory>
#include <string_view>

#include "runtime/backend/delegating_backend.h"
#include "runtime/check/op_instance.h"

namespace dlb {

class PerturbingBackend final : public DelegatingBackend {
 public:
  // The pass to break, as "op.pass": conv.forward, conv.backward_data, conv.backward_weights,
  // linear.forward, batch_norm.forward, batch_norm.backward, max_pool.backward, sgd.update.
  // Throws InvalidArgument naming these for anything else.
  PerturbingBackend(std::unique_ptr<Backend> inner, std::string_view target);
  // Throws InvalidArgument, naming the targets, unless `target` is one.
  static void check_target(std::string_view target);
  std::string_view name() const override { return name_; }

  // The inner backend's own fused and composed ops, so that they run as that backend runs them
  // (the CUDA backend's conv plan with a bias, its fused batch norm + ReLU, its SGD kernels, its
  // counted batch norm, its max pooling with an argmax).
  bool fuses_batch_norm_relu(const OpTypes& t) const override {
    return inner().fuses_batch_norm_relu(t);
  }
  bool fuses_conv_relu(const OpTypes& t) const override { return inner().fuses_conv_relu(t); }
  bool blocks_conv_weights(const OpTypes& t) const override {
    return inner().blocks_conv_weights(t);
  }
  Layout conv_weight_copy_layout(const OpTypes& t, Layout stored) const override {
    return inner().conv_weight_copy_layout(t, stored);
  }
  void conv_relu_forward(const ConvPlan& p, const Tensor& x, const Tensor& w, const Tensor* b,
                         Tensor& y) override;
  void conv_bias_forward(const ConvPlan& p, const Tensor& x, const Tensor& w, const Tensor& b,
                         Tensor& y) override;
  void batch_norm_relu_train(const Tensor& x, const Tensor& g, const Tensor& b, Tensor& rm,
                             Tensor& rv, Tensor& sm, Tensor& si, Tensor& y, float mo,
                             float eps) override;
  void batch_norm_relu_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& g,
                                const Tensor& sm, const Tensor& si, Tensor& dx, Tensor& dg,
                                Tensor& db) override;
  void sgd_update_unscaled(const SgdConfig& c, const Tensor& g, const Tensor& s, Tensor& m,
                           Tensor& p) override;
  void sgd_update_with_copy(const SgdConfig& c, const Tensor& g, const Tensor* s, Tensor& m,
                            Tensor& p, Tensor& compute) override;
  void sgd_update_group(const SgdConfig& c, const std::vector<SgdParamRef>& group,
                        const Tensor* s) override;
  void batch_norm_train_counted(bool relu, const Tensor& x, const Tensor& g, const Tensor& b,
                                Tensor& rm, Tensor& rv, Tensor& sm, Tensor& si, Tensor& y, float mo,
                                float eps, Tensor* num_batches_tracked) override;
  bool saves_pool_argmax() const override { return inner().saves_pool_argmax(); }
  void max_pool_forward_argmax(const PoolDesc& p, const Tensor& x, Tensor& y,
                               Tensor& argmax) override;
  void max_pool_backward_argmax(const PoolDesc& p, const Tensor& argmax, const Tensor& dy,
                                Tensor& dx) override;
  void conv_forward(const ConvPlan& p, const Tensor& x, const Tensor& w, Tensor& y) override;
  void conv_backward_data(const ConvPlan& p, const Tensor& dy, const Tensor& w,
                          Tensor& dx) override;
  void conv_backward_filter(const ConvPlan& p, const Tensor& x, const Tensor& dy,
                            Tensor& dw) override;
  void bias_add(const Tensor& b, Tensor& y) override;
  void batch_norm_train(const Tensor& x, const Tensor& g, const Tensor& b, Tensor& rm, Tensor& rv,
                        Tensor& sm, Tensor& si, Tensor& y, float mo, float eps) override;
  void batch_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& g, const Tensor& sm,
                           const Tensor& si, Tensor& dx, Tensor& dg, Tensor& db) override;
  void pool_backward(const PoolDesc& p, const Tensor& x, const Tensor& y, const Tensor& dy,
                     Tensor& dx) override;
  void sgd_update(const SgdConfig& c, const Tensor& g, Tensor& m, Tensor& p) override;

 private:
  // Moves element numel/2 of `t` (in storage order) when `kind.pass` is the target.
  void perturb(OpKind kind, CheckPass pass, Tensor& t);
  OpKind kind_;
  CheckPass pass_;
  std::string name_;
};

}  // namespace dlb
