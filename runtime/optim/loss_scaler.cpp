#include "runtime/optim/loss_scaler.h"

#include <fmt/format.h>

#include <cmath>

#include "runtime/core/error.h"

namespace dlb {

LossScaler::LossScaler(Backend& backend, const LossScaleConfig& config, Tensor gradients)
    : backend_(backend), config_(config), gradients_(std::move(gradients)) {
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
  state_ = backend.empty({kLossScaleSlots}, DType::kF32, MemCategory::kOptimizerState,
                         "loss-scale state");
  const float initial[kLossScaleSlots] = {config.initial_scale, 0.f, 0.f, 0.f};
  backend.copy_from_host(initial, state_);
}

void LossScaler::scaled_loss_gradient(const Tensor& probs, const Tensor& labels, Tensor& dlogits) {
  backend_.softmax_cross_entropy_backward_scaled(probs, labels, state_, dlogits);
}

void LossScaler::check_gradients() { backend_.find_non_finite(gradients_, state_); }

void LossScaler::update() { backend_.update_loss_scale(config_, state_); }

float LossScaler::read(LossScaleSlot slot) {
  float host[kLossScaleSlots];
  backend_.copy_to_host(state_, host);
  return host[slot];
}

float LossScaler::scale() { return read(kScaleSlot); }

int64_t LossScaler::skipped_steps() { return static_cast<int64_t>(read(kSkippedSlot)); }

}  // namespace dlb
