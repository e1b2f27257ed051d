#include "runtime/optim/loss_scaler.h"

#include <fmt/format.h>

#include <cmath>

#include "runtime/core/error.h"

namespace dlb {

void LossScaler::check(const LossScaleConfig& config) {
  if (!(config.initial_scale > 0.f) || !std::isfinite(config.initial_scale)) {
    throw InvalidArgument(
        fmt::format("the loss scale must be positive and finite (got {})", config.initial_scale));
  }
  if (!(config.growth >= 1.f) || !(config.backoff > 0.f && config.backoff <= 1.f) ||
      config.growth_interval < 1) {
    throw InvalidArgument(fmt::format(
        "loss scaling needs growth >= 1, backoff in (0, 1] and a growth interval >= 1 (got {}, "
        "{}, {})",
        config.growth, config.backoff, config.growth_interval));
  }
}

int LossScaler::declare_state(std::vector<TensorInfo>& table) {
  return declare_tensor(table, {"loss-scale state", TensorKind::kBuffer, Shape{kLossScaleSlots},
                                DType::kF32, -1, -1, MemCategory::kOptimizerState});
}

LossScaler::LossScaler(Backend& backend, const LossScaleConfig& config, const BoundStep& step,
                       int gradients_id, int state_id)
    : backend_(backend),
      config_(config),
      step_(step),
      gradients_id_(gradients_id),
      state_id_(state_id) {
  check(config);
  const float initial[kLossScaleSlots] = {config.initial_scale, 0.f, 0.f, 0.f};
  backend.copy_from_host(initial, step.tensor(state_id));
}

void LossScaler::scaled_loss_gradient(const Tensor& probs, const Tensor& labels, Tensor& dlogits) {
  backend_.softmax_cross_entropy_backward_scaled(probs, labels, state(), dlogits);
}

void LossScaler::check_gradients() {
  backend_.find_non_finite(step_.tensor(gradients_id_), step_.tensor(state_id_));
}

void LossScaler::update() { backend_.update_loss_scale(config_, step_.tensor(state_id_)); }

float LossScaler::read(LossScaleSlot slot) {
  float host[kLossScaleSlots];
  backend_.copy_to_host(state(), host);
  return host[slot];
}

float LossScaler::scale() { return read(kScaleSlot); }

int64_t LossScaler::skipped_steps() { return static_cast<int64_t>(read(kSkippedSlot)); }

}  // namespace dlb
