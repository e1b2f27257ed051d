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
  if (!scaler_) {
    backend_.sgd_update(config_, p.grad, momentum_[i], p.value);
  } else {
    if (updated_this_step_ == 0) scaler_->check_gradients();
    backend_.sgd_update_unscaled(config_, p.grad, scaler_->state(), momentum_[i], p.value);
    if (++updated_this_step_ == params_.size()) {
      scaler_->update();
      updated_this_step_ = 0;
    }
  }
  if (p.has_compute_copy()) backend_.cast(p.value, p.compute);  // the next step's weights
}

}  // namespace dlb
