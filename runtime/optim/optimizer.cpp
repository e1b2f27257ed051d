#include "runtime/optim/optimizer.h"

#include <fmt/format.h>

#include "runtime/core/error.h"

namespace dlb {

std::vector<int> Optimizer::declare_state(Graph& graph) {
  std::vector<int> ids;
  for (const ParamIds& p : graph.flat_params()) {
    const Shape shape = graph.tensor_infos().at(p.value).shape;
    ids.push_back(graph.declare_tensor({"momentum of " + p.name, TensorKind::kBuffer, shape,
                                        graph.policy().optimizer_state, -1, -1,
                                        MemCategory::kOptimizerState}));
  }
  return ids;
}

void Optimizer::require(const Backend& backend, const PrecisionPolicy& policy, bool scaled) {
  if (scaled) backend.require(Op::kLossScale, OpTypes::of(policy));
  backend.require(Op::kSgd, OpTypes{Precision::kFp32, policy.gradients, policy.master_weights});
}

Optimizer::Optimizer(Backend& backend, const Graph& graph, std::vector<int> momentum,
                     const SgdConfig& config, LossScaler* scaler)
    : backend_(backend),
      graph_(graph),
      momentum_(std::move(momentum)),
      config_(config),
      scaler_(scaler) {
  const PrecisionPolicy& policy = graph.policy();
  if (momentum_.size() != graph.flat_params().size()) {
    throw InvalidArgument(fmt::format("{} momentum buffers for {} parameters", momentum_.size(),
                                      graph.flat_params().size()));
  }
  require(backend, policy, scaler != nullptr);
  for (int id : momentum_) backend.fill(graph.tensor(id), 0.f);
}

void Optimizer::update(size_t i) { update(i, graph_.param(i).grad); }

void Optimizer::update_from(size_t i, const Tensor& flat) {
  const Param p = graph_.param(i);
  const Tensor& own = p.grad;
  const int64_t offset = graph_.grad_offsets().at(i);
  if (flat.numel() < offset + own.numel() || flat.dtype() != own.dtype()) {
    throw InvalidArgument(
        fmt::format("parameter {}'s gradient is not in a buffer of {} values", i, flat.numel()));
  }
  update(i, flat.slice_flat(offset, own.numel()).reshaped(own.shape()).with_layout(own.layout()));
}

void Optimizer::update(size_t i, const Tensor& grad) {
  Param p = graph_.param(i);  // handles into the bound table, as it is now
  Tensor& momentum = graph_.tensor(momentum_.at(i));
  const Tensor* scale_state = nullptr;
  if (scaler_) {
    if (updated_this_step_ == 0) scaler_->check_gradients();
    scale_state = &scaler_->state();
  }
  if (p.has_compute_copy()) {  // the next step's weights, written by the update where it can
    backend_.sgd_update_with_copy(config_, grad, scale_state, momentum, p.value, p.compute);
  } else if (scale_state) {
    backend_.sgd_update_unscaled(config_, grad, *scale_state, momentum, p.value);
  } else {
    backend_.sgd_update(config_, grad, momentum, p.value);
  }
  if (scaler_ && ++updated_this_step_ == size()) {
    scaler_->update();
    updated_this_step_ = 0;
  }
}

}  // namespace dlb
