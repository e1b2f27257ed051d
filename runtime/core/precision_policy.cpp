#include "runtime/core/precision_policy.h"

namespace dlb {

std::string_view tensor_role_name(TensorRole r) {
  switch (r) {
    case TensorRole::kMasterWeights:
      return "master_weights";
    case TensorRole::kComputeWeights:
      return "compute_weights";
    case TensorRole::kActivations:
      return "activations";
    case TensorRole::kGradients:
      return "gradients";
    case TensorRole::kOptimizerState:
      return "optimizer_state";
    case TensorRole::kStatistics:
      return "statistics";
  }
  return "?";
}

DType PrecisionPolicy::dtype(TensorRole role) const {
  switch (role) {
    case TensorRole::kMasterWeights:
      return master_weights;
    case TensorRole::kComputeWeights:
      return compute_weights;
    case TensorRole::kActivations:
      return activations;
    case TensorRole::kGradients:
      return gradients;
    case TensorRole::kOptimizerState:
      return optimizer_state;
    case TensorRole::kStatistics:
      return DType::kF32;
  }
  return DType::kF32;
}

PrecisionPolicy PrecisionPolicy::for_precision(Precision p) {
  PrecisionPolicy policy;
  policy.math = p;
  if (p == Precision::kFp16 || p == Precision::kBf16) {
    const DType half = p == Precision::kFp16 ? DType::kF16 : DType::kBF16;
    policy.compute_weights = policy.activations = policy.gradients = half;
  }
  return policy;
}

}  // namespace dlb
