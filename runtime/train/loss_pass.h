// The runner of the step's loss pass (Pass::kLoss): softmax cross-entropy of the logits against
// the labels into the probabilities and the loss, then the logits' gradient, scaled by the loss
// scaler's scale where there is one (fp16). Its tensors are the step program's (StepTensorIds).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "runtime/backend/backend.h"
#include "runtime/nn/graph.h"
#include "runtime/optim/loss_scaler.h"
#include "runtime/train/step_program.h"

namespace dlb {

class LossPass final : public PassRunner {
 public:
  // Over `step`, bound with the program whose ids are `ids`; `scaler` may be null. `hook`
  // (TrainConfig::mid_step_hook; may be empty) is called after the pass with the step's index.
  LossPass(Backend& backend, const BoundStep& step, const StepTensorIds& ids, LossScaler* scaler,
           std::function<void(int64_t)> hook)
      : backend_(backend), bound_(step), ids_(ids), scaler_(scaler), hook_(std::move(hook)) {}
  // Unsupported where `backend` cannot run the loss in `graph`'s policy; InvalidArgument where
  // the graph's output is not [batch, classes].
  static void require(const Backend& backend, const Graph& graph);
  void begin_step(int64_t index) override { step_ = index; }
  void run_pass(const Step& step, const LayerContext* ctx) override;
  const std::string& label(const Step& step) const override;

 private:
  Backend& backend_;
  const BoundStep& bound_;
  const StepTensorIds& ids_;
  LossScaler* scaler_;
  std::function<void(int64_t)> hook_;
  int64_t step_ = 0;
};

}  // namespace dlb
