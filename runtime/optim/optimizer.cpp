#include "runtime/optim/optimizer.h"

#include <fmt/format.h>

#include "runtime/core/error.h"

namespace dlb {

std::vector<int> Optimizer::declare_state(const Graph& graph, std::vector<TensorInfo>& table) {
  std::vector<int> ids;
  for (const ParamIds& p : graph.flat_params()) {
    // Stored as the value it updates (elementwise: a blocked weight's momentum is blocked).
    const TensorInfo& value = graph.tensor_infos().at(p.value);
    ids.push_back(declare_tensor(table, {"momentum of " + p.name, TensorKind::kBuffer, value.shape,
                                         graph.policy().optimizer_state, -1, -1,
                                         MemCategory::kOptimizerState, value.layout}));
  }
  return ids;
}

void Optimizer::require(const Backend& backend, const PrecisionPolicy& policy, bool scaled) {
  if (scaled) backend.require(Op::kLossScale, OpTypes::of(policy));
  backend.require(Op::kSgd, OpTypes{Precision::kFp32, policy.gradients, policy.master_weights});
}

Optimizer::Optimizer(Backend& backend, const Graph& graph, const BoundStep& step,
                     std::vector<int> momentum, const SgdConfig& config, LossScaler* scaler)
    : backend_(backend),
      graph_(graph),
      step_(step),
      momentum_(std::move(momentum)),
      config_(config),
      scaler_(scaler) {
  const PrecisionPolicy& policy = graph.policy();
  if (momentum_.size() != graph.flat_params().size()) {
    throw InvalidArgument(fmt::format("{} momentum buffers for {} parameters", momentum_.size(),
                                      graph.flat_params().size()));
  }
  require(backend, policy, scaler != nullptr);
  for (int id : momentum_) backend.fill(step.tensor(id), 0.f);
}

// Parameter i's gradient from its place in `flat`, a buffer laid out as the flat gradient buffer.
Tensor Optimizer::gradient_in(size_t i, const Tensor& flat) const {
  const Tensor& own = step_.tensor(graph_.flat_params().at(i).grad);
  const int64_t offset = graph_.grad_offsets().at(i);
  if (flat.numel() < offset + own.numel() || flat.dtype() != own.dtype()) {
    throw InvalidArgument(
        fmt::format("parameter {}'s gradient is not in a buffer of {} values", i, flat.numel()));
  }
  return flat.slice_flat(offset, own.numel()).reshaped(own.shape()).with_layout(own.layout());
}

void Optimizer::update_range(size_t first, size_t count, const Tensor* flat) {
  if (count == 0) return;
  if (first + count > size()) {
    throw InvalidArgument(fmt::format("parameters {}..{} of {}", first, first + count - 1, size()));
  }
  // Handles into the bound step, as it is now; reserved, so the group's pointers stay put.
  std::vector<Param> params;
  std::vector<Tensor> grads;
  params.reserve(count);
  grads.reserve(count);
  std::vector<SgdParamRef> group;
  for (size_t i = first; i < first + count; ++i) {
    params.push_back(step_.param(graph_.flat_params()[i]));
    Param& p = params.back();
    grads.push_back(flat ? gradient_in(i, *flat) : p.grad);
    // The next step's weights, written by the update where it can.
    group.push_back({&grads.back(), &step_.tensor(momentum_.at(i)), &p.value,
                     p.has_compute_copy() ? &p.compute : nullptr});
  }
  const Tensor* scale_state = nullptr;
  if (scaler_) {
    if (updated_this_step_ == 0) scaler_->check_gradients();
    scale_state = &scaler_->state();
  }
  backend_.sgd_update_group(config_, group, scale_state);
  if (scaler_ && (updated_this_step_ += count) == size()) {
    scaler_->update();
    updated_this_step_ = 0;
  }
}

}  // namespace dlb
