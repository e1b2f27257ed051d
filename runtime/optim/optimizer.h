// The optimizer owns its state: torch.optim.SGD with momentum (dampening 0, no Nesterov), one
// momentum buffer per parameter, zero-initialised, which equals torch's "buffer = d_p on the
// first step". It updates a range of parameters at a time (one backend call, which a GPU makes
// one launch), so a sync policy can update per bucket.
#pragma once
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/nn/graph.h"
#include "runtime/optim/loss_scaler.h"

namespace dlb {

class Optimizer {
 public:
  // Declares one momentum buffer per flat parameter of `graph` (Graph::flat_params) in `table`
  // (a step's, which begins with the graph's); their ids, in that order.
  static std::vector<int> declare_state(const Graph& graph, std::vector<TensorInfo>& table);
  // Throws Unsupported where `backend` cannot update (and, `scaled`, unscale) in `policy`'s
  // dtypes: before anything is allocated.
  static void require(const Backend& backend, const PrecisionPolicy& policy, bool scaled);
  // Over `graph`'s flat parameters, bound as `step` (which must outlive it), with the momentum
  // declare_state declared, which this zeroes: update(i) updates the i-th, whose tensors it takes
  // from the bound step at each update. With a loss scaler (fp16), the first update of a step
  // checks every gradient, each update divides by the scale or is skipped, and the last one updates
  // the scale: every parameter must be updated once per step.
  Optimizer(Backend& backend, const Graph& graph, const BoundStep& step, std::vector<int> momentum,
            const SgdConfig& config, LossScaler* scaler = nullptr);
  void update(size_t i) { update_range(i, 1); }
  // Parameters [first, first + count), in one Backend::sgd_update_group.
  void update_range(size_t first, size_t count) { update_range(first, count, nullptr); }
  // The same from `flat`, a buffer laid out as the flat gradient buffer (a stale slot): each
  // parameter's gradient from its place in it.
  void update_range_from(size_t first, size_t count, const Tensor& flat) {
    update_range(first, count, &flat);
  }
  size_t size() const { return graph_.flat_params().size(); }
  const Tensor& momentum(size_t i) const { return step_.tensor(momentum_.at(i)); }
  const SgdConfig& config() const { return config_; }
  // The rate of the updates from now on (a learning-rate rule's, runtime/optim/lr_schedule.h).
  void set_lr(float lr) { config_.lr = lr; }
  // With loss scaling, a step's first update reads every gradient (the inf/NaN check): whoever
  // orders updates after reductions must complete them all before it.
  bool reads_all_gradients_first() const { return scaler_ != nullptr; }
  bool at_step_start() const { return updated_this_step_ == 0; }

 private:
  void update_range(size_t first, size_t count, const Tensor* flat);
  Tensor gradient_in(size_t i, const Tensor& flat) const;
  Backend& backend_;
  const Graph& graph_;
  const BoundStep& step_;
  std::vector<int> momentum_;  // tensor ids
  SgdConfig config_;
  LossScaler* scaler_;
  size_t updated_this_step_ = 0;
};

}  // namespace dlb
