// One backend operation at one shape: what the op checker (dlbench check-ops) runs on a backend
// and compares with a float64 reference. Layers declare the instances their passes call
// (Layer::op_instances), so the checker covers exactly what the reference models run. An
// instance has a canonical text form, "conv:n=2,c=64,h=56,w=56,k=64,r=3,s=1,p=1,bias=0", which
// dedupes instances and lets a failure be reproduced alone (--instance).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/backend/backend.h"

namespace dlb {

enum class OpKind {
  kConv,                 // conv_forward / conv_bias_forward and both gradients
  kLinear,               // matmul + bias_add, and its gradients
  kBatchNorm,            // training and inference forward, backward (and the fused ReLU)
  kRelu,                 //
  kMaxPool,              // pool_forward / pool_backward, PoolMode::kMax
  kAvgPool,              // PoolMode::kAvg
  kAdaptiveAvgPool,      //
  kDropout,              //
  kAdd,                  // add, and accumulate (a fork's gradient)
  kSoftmaxCrossEntropy,  // the loss
  kSgd,                  // the update of one parameter, as the optimizer calls it
  kLossScale,            // fp16: the overflow check of the flat gradient buffer, the scale's update
};
inline constexpr OpKind kOpKinds[] = {OpKind::kConv,
                                      OpKind::kLinear,
                                      OpKind::kBatchNorm,
                                      OpKind::kRelu,
                                      OpKind::kMaxPool,
                                      OpKind::kAvgPool,
                                      OpKind::kAdaptiveAvgPool,
                                      OpKind::kDropout,
                                      OpKind::kAdd,
                                      OpKind::kSoftmaxCrossEntropy,
                                      OpKind::kSgd,
                                      OpKind::kLossScale};
std::string_view op_kind_name(OpKind k);  // "conv", "batch_norm", "softmax_cross_entropy"...
std::optional<OpKind> parse_op_kind(std::string_view s);

// The passes the checker runs, each one backend call (or two that a layer always makes
// together, as conv_bias_forward), compared separately.
enum class CheckPass {
  kForward,          // training forward: outputs and what it saves
  kForwardInfer,     // batch norm with running statistics
  kBackwardData,     // the input's gradient
  kBackwardWeights,  // the weight's gradient (a convolution's filter)
  kBackwardBias,     // the bias's gradient
  kBackward,         // every gradient of an op that computes them in one call (batch norm)
  kForwardRelu,      // batch norm or convolution + ReLU in one call, where the backend fuses them
  kBackwardRelu,     //
  kAccumulate,       // y += x
  kBackwardScaled,   // the loss gradient times the fp16 loss scale
  // SGD with momentum and weight decay, as Optimizer::update calls it: with the gradient divided
  // by the loss scale in fp16 (and nothing moved after an overflow), storing the
  // compute-precision copy of a conv or linear parameter in 16-bit runs.
  kUpdate,
  kFindNonFinite,  // fp16: the overflow check, on clean gradients and on a planted inf and NaN
  kScaleUpdate,    // fp16: GradScaler's back-off and growth
};
inline constexpr CheckPass kCheckPasses[] = {
    CheckPass::kForward,         CheckPass::kForwardInfer, CheckPass::kBackwardData,
    CheckPass::kBackwardWeights, CheckPass::kBackwardBias, CheckPass::kBackward,
    CheckPass::kForwardRelu,     CheckPass::kBackwardRelu, CheckPass::kAccumulate,
    CheckPass::kBackwardScaled,  CheckPass::kUpdate,       CheckPass::kFindNonFinite,
    CheckPass::kScaleUpdate};
std::string_view check_pass_name(CheckPass p);  // "backward_data"...
std::optional<CheckPass> parse_check_pass(std::string_view s);

struct OpInstance {
  OpKind kind = OpKind::kConv;
  // The input's shape, N C H W for 4-D data (N F for linear; N classes for the loss; the
  // parameter's element count for sgd, as {numel}; the flat gradient buffer's for loss_scale).
  Shape in;
  ConvDesc conv;                       // kConv: everything of the problem but its types and layout
  int64_t features = 0;                // kLinear: output features
  bool bias = false;                   // kConv, kLinear
  PoolDesc pool;                       // kMaxPool, kAvgPool
  int64_t out_h = 0, out_w = 0;        // kAdaptiveAvgPool
  float p = 0.f;                       // kDropout
  float eps = 1e-5f, momentum = 0.1f;  // kBatchNorm
  // kSgd: the parameter has a compute-precision copy (conv and linear weights and biases; not
  // batch norm's scale and shift), which 16-bit runs update with it.
  bool copy = false;

  // The canonical text: the kind, then its fields in a fixed order. Two instances with the same
  // text are the same problem.
  std::string spec() const;
  Shape out() const;  // the output's shape
  // Floating-point operations of one forward pass (a multiply-add is 2), for perf mode.
  double forward_flops() const;
};

// Throws InvalidArgument, naming the instance, when one of its tensors (input, output, weight)
// has more than 2^31 elements: what a typo in a text or an image size can ask for.
void check_instance_sizes(const OpInstance& op);

// About the most memory checking `op` holds at once, in bytes, over all its passes and
// precisions (the drawn values, the backend's tensors, the float64 references and what is read
// back): per element of its tensors (input, output, weight; an update's parameter, gradient,
// momentum and copy), the most measured on the CPU backend (/usr/bin/time's maximum resident
// size, less the process's own 250 MB): a convolution 66 bytes, batch norm 53, max pooling 64,
// other layers 30 to 55, an update 16 and loss scaling 7. So 72, 24 and 16: an estimate for
// refusing what cannot fit before any of it is drawn, not a bound.
double check_bytes_estimate(const OpInstance& op);

// The inverse of spec(): strict (every field of the kind, nothing else, integers in range, the
// geometry valid). Throws InvalidArgument naming what is wrong.
OpInstance parse_op_instance(std::string_view spec);

// Which pairs a backend runs as one op (Backend::fuses_batch_norm_relu, fuses_conv_relu).
struct FusedOps {
  bool batch_norm_relu = false;
  bool conv_relu = false;
};
// The passes an instance has on a backend at a precision: fp16 adds loss scaling's, 16-bit runs
// update with a copy, a backend that fuses batch norm + ReLU gets the fused passes, and one that
// fuses a convolution with its ReLU the fused forward (its backward is the ReLU's and the
// convolution's own passes).
std::vector<CheckPass> passes_of(const OpInstance& op, Precision precision, FusedOps fused);

}  // namespace dlb
