// The reference backend: plain loops, matrix products by oneDNN (OpenBLAS sgemm where oneDNN has
// only reference loops), and convolution by oneDNN or by im2col + OpenBLAS sgemm (conv.cpp
// chooses per pass), in f32 and NCHW (channels last in a native bf16 run on a CPU
// with AMX: activation_layout). Tensors may be stored in f16 or bf16: an
// op then computes on f32 copies and rounds on store (f32_views.h), except bf16 convolutions and
// matrix products where oneDNN multiplies bf16 natively (AVX-512 BF16). Every other backend is
// tested against it. Each op lives in the file of the same name.
#pragma once
#include <initializer_list>

#include "runtime/backend/backend.h"

namespace dlb {

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(const BackendOptions& options);
  std::string_view name() const override { return "cpu"; }
  bool supports(Op op, const OpTypes& types) const override;
  // bf16 where oneDNN multiplies bf16 natively here (AVX-512 BF16), f32 otherwise.
  ProductArithmetic matmul_arithmetic(const OpTypes& types) const override;
  std::map<std::string, std::string> environment() const override;

  void copy_from_host(const void* src, Tensor& dst) override;
  void copy_to_host(const Tensor& src, void* dst) override;
  void copy(const Tensor& src, Tensor& dst) override;
  void fill(Tensor& t, float value) override;
  void cast(const Tensor& src, Tensor& dst) override;
  void synchronize() override {}

  std::unique_ptr<ConvPlan> make_conv_plan(const ConvDesc& desc) override;
  void conv_forward(const ConvPlan& plan, const Tensor& x, const Tensor& w, Tensor& y) override;
  void conv_backward_data(const ConvPlan& plan, const Tensor& dy, const Tensor& w,
                          Tensor& dx) override;
  void conv_backward_filter(const ConvPlan& plan, const Tensor& x, const Tensor& dy,
                            Tensor& dw) override;
  // A convolution takes the ReLU after it over (the graph fuses the pair, Graph::fuse_relus): its
  // forward is the Backend's conv_relu_forward, the ReLU in place on the fresh output. Not
  // oneDNN's eltwise post-op: in oneDNN 2.6 that computes max(x, 0), which turns a NaN into 0
  // where torch.relu, and relu_forward, pass it (tests/unit/cpu_conv_plan_test.cpp).
  bool fuses_conv_relu(const OpTypes&) const override { return true; }
  // oneDNN's direct convolution on AVX-512 reads f32 weights in OIhw16i16o and writes their
  // gradient so (bf16: writes it so): stored so, those passes reorder no weights, where an f32
  // ResNet-50 step reordered about 100 MB each way (docs/cpu.md). im2col reads them through a
  // relay of 16 channels at a time, and a primitive that wants another layout reorders them in
  // its workspace. Not under --conv-algo=im2col (which reads every weight through the relay), nor
  // where oneDNN blocks by 8 (AVX2: cpu_blocks_channels_by_16).
  bool blocks_conv_weights(const OpTypes& types) const override;
  // Channels last (NHWC) for a native bf16 run on a CPU with AMX, whose kernels read it (oneDNN's
  // acdb): stored NCHW, every AMX pass reordered its activations in and out (docs/cpu.md). NCHW
  // otherwise, and under --conv-algo=im2col (whose columns are NCHW's).
  Layout activation_layout(const OpTypes& types) const override;
  Layout conv_weight_copy_layout(const OpTypes& types, Layout stored) const override;
  // Convolution and bias, rounded once on store (as PyTorch's CPU kernels do): on f32 views, or in
  // a native bf16 plan's primitive.
  void conv_bias_forward(const ConvPlan& plan, const Tensor& x, const Tensor& w, const Tensor& b,
                         Tensor& y) override;
  void bias_add(const Tensor& b, Tensor& y) override;
  void bias_backward(const Tensor& dy, Tensor& db) override;

  void matmul(Precision math, bool trans_a, bool trans_b, float alpha, const Tensor& a,
              const Tensor& b, float beta, Tensor& c) override;

  void batch_norm_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                        Tensor& running_mean, Tensor& running_var, Tensor& save_mean,
                        Tensor& save_invstd, Tensor& y, float momentum, float eps) override;
  void batch_norm_infer(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                        const Tensor& running_mean, const Tensor& running_var, Tensor& y,
                        float eps) override;
  void batch_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                           const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx,
                           Tensor& dgamma, Tensor& dbeta) override;
  // Batch norm with its ReLU in one pass each way (the graph fuses the pair, Graph::fuse_relus).
  bool fuses_batch_norm_relu(const OpTypes&) const override { return true; }
  void batch_norm_relu_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                             Tensor& running_mean, Tensor& running_var, Tensor& save_mean,
                             Tensor& save_invstd, Tensor& y, float momentum, float eps) override;
  void batch_norm_relu_backward(const Tensor& x, const Tensor& y, const Tensor& dy,
                                const Tensor& gamma, const Tensor& save_mean,
                                const Tensor& save_invstd, Tensor& dx, Tensor& dgamma,
                                Tensor& dbeta) override;

  void relu_forward(const Tensor& x, Tensor& y) override;
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) override;

  void pool_forward(const PoolDesc& desc, const Tensor& x, Tensor& y) override;
  void pool_backward(const PoolDesc& desc, const Tensor& x, const Tensor& y, const Tensor& dy,
                     Tensor& dx) override;
  void adaptive_avg_pool_forward(const Tensor& x, Tensor& y) override;
  void adaptive_avg_pool_backward(const Tensor& dy, Tensor& dx) override;

  void dropout_forward(const Tensor& x, float p, const DropoutSeed& seed, Tensor& mask,
                       Tensor& y) override;
  void dropout_backward(const Tensor& dy, const Tensor& mask, Tensor& dx) override;

  void add(const Tensor& a, const Tensor& b, Tensor& y) override;
  void accumulate(const Tensor& x, Tensor& y) override;

  void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor& probs,
                             Tensor& loss) override;
  void softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                      Tensor& dlogits) override;

  void sgd_update(const SgdConfig& cfg, const Tensor& grad, Tensor& momentum_buf,
                  Tensor& param) override;

  void softmax_cross_entropy_backward_scaled(const Tensor& probs, const Tensor& labels,
                                             const Tensor& scaler, Tensor& dlogits) override;
  void find_non_finite(const Tensor& grads, Tensor& scaler) override;
  void sgd_update_unscaled(const SgdConfig& cfg, const Tensor& grad, const Tensor& scaler,
                           Tensor& momentum_buf, Tensor& param) override;
  void sgd_update_with_copy(const SgdConfig& cfg, const Tensor& grad, const Tensor* scaler,
                            Tensor& momentum_buf, Tensor& param, Tensor& compute) override;
  void update_loss_scale(const LossScaleConfig& cfg, Tensor& scaler) override;
  void increment(Tensor& counter) override;

  float* scratch(size_t floats) { return static_cast<float*>(workspace(floats * sizeof(float))); }

 private:
  void update_in_masters_order(const SgdConfig& cfg, const Tensor& grad, const Tensor* scaler,
                               Tensor& momentum_buf, Tensor& param, Tensor& compute);
  ConvAlgoChoice conv_algo_;               // --conv-algo
  std::optional<size_t> workspace_limit_;  // --workspace-limit: per convolution pass
};

// Shared argument checks of the CPU ops.
void check_f32(const Tensor& t, std::string_view what);
// An allocated f32 tensor in any layout (the caller reads the layout).
void check_f32_data(const Tensor& t, std::string_view what);
void check_same_shape(const Tensor& a, const Tensor& b, std::string_view what);
// Whether the tensors are stored in one float type (f32, f16 or bf16), so that an op can read and
// write them as they are (runtime/core/stored_float.h: each element loaded into a float, and
// rounded once on store: the same bits as on f32 views of them, without the copies). Otherwise
// the op runs on F32Views. Throws InvalidArgument for one not allocated.
bool one_float_type(std::initializer_list<const Tensor*> tensors, std::string_view what);
// Whether the tensors store their elements in one order (one layout).
bool one_layout(std::initializer_list<const Tensor*> tensors);
// One float type and one layout (NCHW, or channels last), so that an element-wise op's elements
// correspond.
bool stored_as_one(std::initializer_list<const Tensor*> tensors, std::string_view what);

}  // namespace dlb
