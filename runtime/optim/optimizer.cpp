#include "runtime/optim/optimizer.h"

namespace dlb {

Optimizer::Optimizer(Backend& backend, std::vector<Param*> params, const SgdConfig& config,
                     const PrecisionPolicy& policy)
    : backend_(backend), params_(std::move(params)), config_(config) {
  backend.require(Op::kSgd, OpTypes{Precision::kFp32, policy.gradients, policy.master_weights});
  for (Param* p : params_) {
    Tensor buf = backend.empty(p->value.shape(), policy.optimizer_state,
                               MemCategory::kOptimizerState, "momentum of " + p->name);
    backend.fill(buf, 0.f);
    momentum_.push_back(std::move(buf));
  }
}

void Optimizer::update(size_t i) {
  backend_.sgd_update(config_, params_[i]->grad, momentum_[i], params_[i]->value);
}

}  // namespace dlb
