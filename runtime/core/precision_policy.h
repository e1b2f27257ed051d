// Which dtype each role of tensor takes in a run (fp32, tf32, fp16, bf16; docs/metrics.md). Layers,
// the graph and the optimizer allocate through this table; no role's dtype is fixed below it.
#pragma once
#include <string_view>

#include "runtime/core/dtype.h"

namespace dlb {

enum class TensorRole {
  kMasterWeights,   // what the optimizer updates
  kComputeWeights,  // what forward and backward read (a cast of the master weights when they
                    // differ)
  kActivations,     // layer outputs, their gradients and saved masks
  kGradients,       // parameter gradients (what is all-reduced)
  kOptimizerState,  // momentum
  kStatistics,      // batch-norm running and saved statistics: fp32 under every precision
};
std::string_view tensor_role_name(TensorRole r);

struct PrecisionPolicy {
  Precision math = Precision::kFp32;  // what matrix products may use (tensor cores or not)
  DType master_weights = DType::kF32;
  DType compute_weights = DType::kF32;
  DType activations = DType::kF32;
  DType gradients = DType::kF32;
  DType optimizer_state = DType::kF32;

  DType dtype(TensorRole role) const;
  bool operator==(const PrecisionPolicy& o) const {
    return math == o.math && master_weights == o.master_weights &&
           compute_weights == o.compute_weights && activations == o.activations &&
           gradients == o.gradients && optimizer_state == o.optimizer_state;
  }
  // fp32 and tf32 keep every role in f32. fp16 and bf16 compute in 16 bits with fp32 master
  // weights, fp32 optimizer state and fp32 statistics (as PyTorch's autocast + GradScaler).
  static PrecisionPolicy for_precision(Precision p);
};

}  // namespace dlb
