// The optimizer owns its state: torch.optim.SGD with momentum (dampening 0, no Nesterov), one
// momentum buffer per parameter, zero-initialised, which equals torch's "buffer = d_p on the
// first step". It updates one parameter at a time, so a sync policy can update per bucket.
#pragma once
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/nn/layer.h"
#include "runtime/optim/loss_scaler.h"

namespace dlb {

class Optimizer {
 public:
  // `params` in any order; update(i) refers to that order. With a loss scaler (fp16), the first
  // update of a step checks every gradient, each update divides by the scale or is skipped, and
  // the last one updates the scale: every parameter must be updated once per step.
  Optimizer(Backend& backend, std::vector<Param*> params, const SgdConfig& config,
            const PrecisionPolicy& policy, LossScaler* scaler = nullptr);
  void update(size_t i);
  size_t size() const { return params_.size(); }
  const Param& param(size_t i) const { return *params_[i]; }
  const Tensor& momentum(size_t i) const { return momentum_[i]; }
  const SgdConfig& config() const { return config_; }
  // With loss scaling, a step's first update reads every gradient (the inf/NaN check): whoever
  // orders updates after reductions must complete them all before it.
  bool reads_all_gradients_first() const { return scaler_ != nullptr; }
  bool at_step_start() const { return updated_this_step_ == 0; }

 private:
  Backend& backend_;
  std::vector<Param*> params_;
  std::vector<Tensor> momentum_;
  SgdConfig config_;
  LossScaler* scaler_;
  size_t updated_this_step_ = 0;
};

}  // namespace dlb
