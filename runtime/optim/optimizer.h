// The optimizer owns its state: torch.optim.SGD with momentum (dampening 0, no Nesterov), one
// momentum buffer per parameter, zero-initialised, which equals torch's "buffer = d_p on the
// first step". It updates one parameter at a time, so a sync policy can update per bucket.
#pragma once
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/nn/layer.h"

namespace dlb {

class Optimizer {
 public:
  // `params` in any order; update(i) refers to that order.
  Optimizer(Backend& backend, std::vector<Param*> params, const SgdConfig& config,
            const PrecisionPolicy& policy);
  void update(size_t i);
  size_t size() const { return params_.size(); }
  const Param& param(size_t i) const { return *params_[i]; }
  const Tensor& momentum(size_t i) const { return momentum_[i]; }
  const SgdConfig& config() const { return config_; }

 private:
  Backend& backend_;
  std::vector<Param*> params_;
  std::vector<Tensor> momentum_;
  SgdConfig config_;
};

}  // namespace dlb
