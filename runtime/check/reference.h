// The float64 reference of every backend op the checker runs, on the host, written from the
// definitions (PyTorch's semantics) and not from any backend's code. Each function takes the
// exact values the backend was given, in logical order (NCHW; KCRS weights; row-major matrices),
// and returns, for each output, the answer and how far a correct backend may be from it before
// the output is stored (bounds.h: the caller adds the store's rounding for the output's type).
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/core/shape.h"

namespace dlb {

// A tensor's values in float64, logical order.
struct HostArray {
  Shape shape;
  std::vector<double> v;
  HostArray() = default;
  explicit HostArray(Shape s) : shape(std::move(s)), v(static_cast<size_t>(shape.numel()), 0.0) {}
  int64_t numel() const { return static_cast<int64_t>(v.size()); }
};

// One output's answer and, per element, the distance from it that the arithmetic allows.
struct Expected {
  HostArray want;
  std::vector<double> bound;
  explicit Expected(const Shape& s = {}) : want(s), bound(want.v.size(), 0.0) {}
};

// Unit roundoffs of the arithmetic an op does: the accumulation of its products (the precision's
// math), the rounding of the products' inputs (tf32's, relative, bounds.h input_roundoff), its
// elementwise work (f32, which every backend computes in), and the data type's, for a result
// stored and read again within the op (a linear layer's product before its bias is added).
//
// `flush` is the most a flush of one subnormal number to zero moves it (2^-126, f32's and bf16's
// smallest normal number), for an engine that flushes its products, partial sums and stored
// result (AVX-512 BF16's): a sum of k products adds at most 2k + 1 of them, absolute. Its inputs
// may be flushed too; the op checker draws them from N(0, 1), where one below 2^-126 is too
// rare to bound.
struct Arithmetic {
  double math = 0, inputs = 0, ops = 0, data = 0, flush = 0;
};

// Convolution (cross-correlation, PyTorch's conv2d), with `b` null when there is no bias. The
// bound is that of the arithmetic the pass declares (PassAlgorithm::arithmetic): sums of products,
// or Winograd's transforms, whose bound rests on the magnitudes below.
Expected ref_conv_forward(const ConvDesc& d, const HostArray& x, const HostArray& w,
                          const HostArray* b, const Arithmetic& a,
                          ConvArithmetic how = ConvArithmetic::kProducts);
Expected ref_conv_backward_data(const ConvDesc& d, const HostArray& dy, const HostArray& w,
                                const Arithmetic& a,
                                ConvArithmetic how = ConvArithmetic::kProducts);
Expected ref_conv_backward_filter(const ConvDesc& d, const HostArray& x, const HostArray& dy,
                                  const Arithmetic& a,
                                  ConvArithmetic how = ConvArithmetic::kProducts);

// What bounds the rounding of a pass computed by oneDNN's Winograd F(4x4, 3x3), per output, as
// Σ|aᵢ||bᵢ| does for sums of products: the pass's every term in absolute value, transform
// coefficients included, |Aᵀ|[(|G||g||Gᵀ|) ⊙ (|Bᵀ||d||B|)]|A| summed over what the pass reduces
// (reference_winograd.cpp). 3x3 kernels at stride 1 in one group only (InvalidArgument
// otherwise), as oneDNN's.
std::vector<double> winograd_forward_magnitude(const ConvDesc& d, const HostArray& x,
                                               const HostArray& w);
std::vector<double> winograd_backward_data_magnitude(const ConvDesc& d, const HostArray& dy,
                                                     const HostArray& w);
std::vector<double> winograd_backward_filter_magnitude(const ConvDesc& d, const HostArray& x,
                                                       const HostArray& dy);
// How many roundings a Winograd pass's terms may pass through besides the reduction's `terms`:
// each 1-D transform combines at most as many values as it has columns, and each may round once
// (inputs 2 x 6, weights 2 x 3, outputs 2 x 6, the weight update's gradients 2 x 4), and the
// product rounds once.
inline constexpr double kWinogradForwardDepth = 31;
inline constexpr double kWinogradUpdateDepth = 33;
// db[c] = the sum of dy over every axis but 1.
Expected ref_bias_backward(const HostArray& dy, const Arithmetic& a);

// y = x wᵀ + b for x [N, F], w [O, F]; dx = dy w; dw = dyᵀ x.
Expected ref_linear_forward(const HostArray& x, const HostArray& w, const HostArray& b,
                            const Arithmetic& a);
Expected ref_linear_backward_data(const HostArray& dy, const HostArray& w, const Arithmetic& a);
Expected ref_linear_backward_weights(const HostArray& dy, const HostArray& x, const Arithmetic& a);

// Batch norm over axis 1, training: y, the saved mean and 1/sqrt(var + eps), and the running
// statistics after the update (unbiased variance), in that order.
struct BatchNormTrain {
  Expected y, save_mean, save_invstd, running_mean, running_var;
};
BatchNormTrain ref_batch_norm_train(const HostArray& x, const HostArray& gamma,
                                    const HostArray& beta, const HostArray& running_mean,
                                    const HostArray& running_var, double momentum, double eps,
                                    const Arithmetic& a);
Expected ref_batch_norm_infer(const HostArray& x, const HostArray& gamma, const HostArray& beta,
                              const HostArray& running_mean, const HostArray& running_var,
                              double eps, const Arithmetic& a);
struct BatchNormGrads {
  Expected dx, dgamma, dbeta;
};
// From the saved statistics as given; `mask` (the fused ReLU's output) zeroes dy where it is not
// positive, when given.
BatchNormGrads ref_batch_norm_backward(const HostArray& x, const HostArray& dy,
                                       const HostArray& gamma, const HostArray& save_mean,
                                       const HostArray& save_invstd, const HostArray* mask,
                                       const Arithmetic& a);
// max(., 0) of a reference output: 1-Lipschitz, so its bound carries over.
void ref_relu_in_place(Expected& e);

Expected ref_relu_forward(const HostArray& x);
Expected ref_relu_backward(const HostArray& y, const HostArray& dy);
Expected ref_pool_forward(const PoolDesc& p, const HostArray& x, const Shape& out,
                          const Arithmetic& a);
Expected ref_pool_backward(const PoolDesc& p, const HostArray& x, const HostArray& dy,
                           const Arithmetic& a);
Expected ref_adaptive_avg_pool_forward(const HostArray& x, int64_t out_h, int64_t out_w,
                                       const Arithmetic& a);
Expected ref_adaptive_avg_pool_backward(const HostArray& dy, const Shape& in, const Arithmetic& a);
// y = x * mask (mask as the backend drew and stored it); dx = dy * mask.
Expected ref_multiply(const HostArray& x, const HostArray& mask, const Arithmetic& a);
Expected ref_add(const HostArray& x, const HostArray& y, const Arithmetic& a);

// Mean softmax cross-entropy of logits [N, C] against `labels`: the probabilities, the loss.
struct SoftmaxCrossEntropy {
  Expected probs, loss;
};
SoftmaxCrossEntropy ref_softmax_cross_entropy(const HostArray& logits,
                                              const std::vector<int64_t>& labels,
                                              const Arithmetic& a);
// scale * (probs - onehot) / N.
Expected ref_softmax_cross_entropy_backward(const HostArray& probs,
                                            const std::vector<int64_t>& labels, double scale,
                                            const Arithmetic& a);

// torch.optim.SGD: buf = m buf + (g / scale + wd p); p -= lr buf. The momentum buffer, then the
// parameter.
struct SgdStep {
  Expected momentum, param;
};
SgdStep ref_sgd(const SgdConfig& cfg, const HostArray& grad, const HostArray& momentum,
                const HostArray& param, double inv_scale, const Arithmetic& a);

// GradScaler's update of the four-float state (backend.h's LossScaleSlot), written from
// torch.cuda.amp.GradScaler's documentation.
std::vector<double> ref_loss_scale_update(const LossScaleConfig& cfg, std::vector<double> state);

}  // namespace dlb
