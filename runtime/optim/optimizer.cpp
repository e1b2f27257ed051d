#include "runtime/optim/optimizer.h"

namespace dlb {

Optimizer::Optimizer(Backend& backend, std::vector<Param*> params, const SgdConfig& config,
                     const PrecisionPolicy& policy, LossScaler* scaler)
    : backend_(backend), params_(std::move(params)), config_(config), scaler_(scaler) {
  if (scaler) backend.require(Op::kLossScale, OpTypes::of(policy));
  backend.require(Op::kSgd, OpTypes{Precision::kFp32, policy.gradients, policy.master_weights});
  for (Param* p : params_) {
    Tensor buf = backend.empty(p->value.shape(), policy.optimizer_state,
                               MemCategory::kOptimizerState, "momentum of " + p->name);
    backend.fill(buf, 0.f);
    momentum_.push_back(std::move(buf));
  }
}

void Optimizer::update(size_t i) {
  Param& p = *params_[i];
  const Tensor* scale_state = nullptr;
  if (scaler_) {
    if (updated_this_step_ == 0) scaler_->check_gradients();
    scale_state = &scaler_->state();
  }
  if (p.has_compute_copy()) {  // the next step's weights, written by the update where it can
    backend_.sgd_update_with_copy(config_, p.grad, scale_state, momentum_[i], p.value, p.compute);
  } else if (scale_state) {
    backend_.sgd_update_unscaled(config_, p.grad, *scale_state, momentum_[i], p.value);
  } else {
    backend_.sgd_update(config_, p.grad, momentum_[i], p.value);
  }
  if (scaler_ && ++updated_this_step_ == params_.size()) {
    scaler_->update();
    updated_this_step_ = 0;
  }
}

}  // namespace dlb
