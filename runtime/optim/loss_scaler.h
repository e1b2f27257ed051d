// Dynamic loss scaling for fp16 training, with torch.cuda.amp.GradScaler's defaults and semantics
// (initial scale 2^16, growth 2 every 2,000 clean steps, backoff 0.5; LossScaleConfig). Its state
// stays on the device (Backend::LossScaleSlot), so a step never waits for the host: the loss
// gradient is scaled as it is computed, the first update of a step checks every gradient for inf
// or NaN, each update divides by the scale or does nothing, and after the last one the scale is
// updated. bf16 has float's range and runs without it, as in PyTorch.
#pragma once
#include "runtime/backend/backend.h"
#include "runtime/nn/bound_step.h"

namespace dlb {

class LossScaler {
 public:
  // Throws InvalidArgument for a configuration that cannot scale.
  static void check(const LossScaleConfig& config);
  // Declares the scaler's state in `table` (a step's); its id.
  static int declare_state(std::vector<TensorInfo>& table);
  // Over `step` (which must outlive it): the model's flat gradient buffer, `gradients_id`
  // (alignment gaps zeroed), and the state declared as `state_id`, which this sets to the
  // initial scale.
  LossScaler(Backend& backend, const LossScaleConfig& config, const BoundStep& step,
             int gradients_id, int state_id);
  const LossScaleConfig& config() const { return config_; }
  const Tensor& state() const { return step_.tensor(state_id_); }

  // dlogits = scale * d(loss)/d(logits), rounded once to dlogits' type.
  void scaled_loss_gradient(const Tensor& probs, const Tensor& labels, Tensor& dlogits);
  // Before a step's first update: whether any gradient is inf or NaN (on the device).
  void check_gradients();
  // After a step's last update.
  void update();

  // Read back from the device (this synchronises): the current scale and the skipped steps.
  float scale();
  int64_t skipped_steps();

 private:
  float read(LossScaleSlot slot);
  Backend& backend_;
  LossScaleConfig config_;
  const BoundStep& step_;
  int gradients_id_, state_id_;
};

}  // namespace dlb
