#include "runtime/train/loss_pass.h"

#include <fmt/format.h>

#include "runtime/core/error.h"

namespace dlb {

void LossPass::require(const Backend& backend, const Graph& graph) {
  const Shape& out = graph.shape(graph.output());
  if (out.rank() != 2) {
    throw InvalidArgument(fmt::format("the model's output {} is not [batch, classes]", out.str()));
  }
  // The loss takes the logits in the activations' dtype and keeps its probabilities in f32.
  const PrecisionPolicy& policy = graph.policy();
  backend.require(Op::kSoftmaxCrossEntropy, OpTypes{policy.math, policy.activations, DType::kF32});
}

const std::string& LossPass::label(const Step& step) const {
  static const std::string kLoss = "loss";
  (void)step;
  return kLoss;
}

void LossPass::run_pass(const Step& step, const LayerContext* ctx) {
  (void)step, (void)ctx;
  const Tensor& labels = bound_.tensor(ids_.labels);
  Tensor& probs = bound_.tensor(ids_.probs);
  Tensor& dlogits = bound_.tensor(ids_.logits_grad);
  backend_.softmax_cross_entropy(bound_.tensor(ids_.logits), labels, probs,
                                 bound_.tensor(ids_.loss));
  if (scaler_) {
    scaler_->scaled_loss_gradient(probs, labels, dlogits);
  } else {
    backend_.softmax_cross_entropy_backward(probs, labels, dlogits);
  }
  if (hook_) hook_(step_);
}

}  // namespace dlb
