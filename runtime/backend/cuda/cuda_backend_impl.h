// The CUDA backend's class: every op of the Backend seam on one GPU (cuda_backend.h makes one).
// Its ops are defined by family, as the CPU backend's are: cuda_backend.cpp (construction,
// copies, streams, capture), conv.cpp (convolution and bias), matmul.cpp, batch_norm.cpp,
// pooling.cpp, elementwise.cpp, loss.cpp and optimizer.cpp, each launching the kernels of the
// family's *_kernels.h. Convolution and batch norm run cuDNN graphs (cudnn_graphs.h), matrix
// products cuBLASLt (matmul_lt.h). All work is queued on one compute stream.
#pragma once
#include <cublasLt.h>
#include <cudnn.h>
#include <fmt/format.h>

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>

#include "runtime/backend/backend.h"
#include "runtime/backend/cuda/cudnn_graphs.h"
#include "runtime/backend/cuda/device.h"
#include "runtime/backend/cuda/event_clock.h"
#include "runtime/backend/cuda/kernel_layout.h"
#include "runtime/backend/cuda/launch.h"
#include "runtime/backend/cuda/matmul_lt.h"
#include "runtime/backend/cuda/staging.h"
#include "runtime/backend/cuda/stored.h"
#include "runtime/core/error.h"
#include "runtime/core/nvtx.h"

namespace dlb::cuda {

// The library handles, shared by the backend and every plan made with them: a plan may outlive
// the backend (a graph's layers are destroyed after it), and its cuDNN execution plans must not
// outlive their handle.
struct LibraryHandles {
  cudnnHandle_t cudnn = nullptr;
  cublasLtHandle_t lt = nullptr;
  explicit LibraryHandles(cudaStream_t stream);
  ~LibraryHandles();
  LibraryHandles(const LibraryHandles&) = delete;
  LibraryHandles& operator=(const LibraryHandles&) = delete;
};

// Argument checks shared by the op families.
void check_f32(const Tensor& t, std::string_view what);
void check_dtype(const Tensor& t, DType dtype, std::string_view what);
void check_numel(const Tensor& t, int64_t n, std::string_view what);

// How `from`'s elements (NCHW) map onto `to`'s: the identity for one layout, the channels-last
// places for an NCHW source and an NHWC destination of rank 4. The reverse is not needed (masters
// are NCHW) and is refused.
ToChannelsLast relayout(const Tensor& from, const Tensor& to, std::string_view what);

// The elements of `t` as T, which must be its storage type (stored.h).
template <typename T>
T* as(const Tensor& t) {
  if (t.dtype() != StorageDType<T>::value) {
    throw InvalidArgument(fmt::format("cuda: a {} tensor read as {}", dtype_name(t.dtype()),
                                      dtype_name(StorageDType<T>::value)));
  }
  return static_cast<T*>(t.raw());
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(const DeviceInfo& device, const BackendOptions& options);
  ~CudaBackend() override;

  std::string_view name() const override { return "cuda"; }
  std::map<std::string, std::string> environment() const override;

  // Data and parameters in f32, fp16 or bf16 storage (stored.h; batch norm's parameters, the
  // probabilities and the optimizer's state stay f32 in a 16-bit run). Strict fp32 or TF32 math
  // on f32 data; 16-bit data uses tensor-op math (cuDNN's and cuBLASLt's), accumulating in f32.
  bool supports(Op, const OpTypes& t) const override;
  // cuBLASLt reads the stored type (matmul_lt.h): 16-bit operands on tensor cores.
  ProductArithmetic matmul_arithmetic(const OpTypes& t) const override { return {t.data, false}; }

  void copy_from_host(const void* src, Tensor& dst) override;
  // Input batches go on a copy stream of their own: the trainer double-buffers them.
  bool async_input_copies() const override { return true; }
  CopyMarks copy_in(const void* src, Tensor& dst, const Mark& free) override;
  void wait_for_input(const Mark& copied) override;
  // Swapped activations go on a stream of their own, to and from pinned host memory.
  CopyMarks swap_copy(const Tensor& src, Tensor& dst) override;
  void wait_for_copy(const Mark& copied) override;
  void copy_to_host(const Tensor& src, void* dst) override;
  void copy(const Tensor& src, Tensor& dst) override;
  void fill(Tensor& t, float value) override;
  // Into a channels-last destination from an NCHW source (a conv weight's master into its
  // 16-bit copy), the elements move to their channels-last places.
  void cast(const Tensor& src, Tensor& dst) override;
  // The 16-bit activations of a mixed-precision run are channels-last (NHWC): cuDNN's tensor-core
  // engines work in it natively, and PyTorch's AMP recommends it for convolutional networks.
  Layout activation_layout(const OpTypes& types) const override;
  // Everything queued: the compute stream's work, the swap copies' and the input copies' (the
  // last first seen on an H100, results/device/: a copy still in flight after synchronize()).
  void synchronize() override;
  StreamRef stream() const override { return {stream_->get()}; }
  const Clock& clock() const override { return *clock_; }

  std::unique_ptr<ConvPlan> make_conv_plan(const ConvDesc& d) override;
  void conv_forward(const ConvPlan& plan, const Tensor& x, const Tensor& w, Tensor& y) override;
  // The bias is added in the forward graph's epilogue: no separate pass over y.
  void conv_bias_forward(const ConvPlan& plan, const Tensor& x, const Tensor& w, const Tensor& b,
                         Tensor& y) override;
  void conv_backward_data(const ConvPlan& plan, const Tensor& dy, const Tensor& w,
                          Tensor& dx) override;
  void conv_backward_filter(const ConvPlan& plan, const Tensor& x, const Tensor& dy,
                            Tensor& dw) override;

  void bias_add(const Tensor& b, Tensor& y) override;
  void bias_backward(const Tensor& dy, Tensor& db) override;

  void matmul(Precision math, bool trans_a, bool trans_b, float alpha, const Tensor& a,
              const Tensor& b, float beta, Tensor& c) override;

  void batch_norm_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                        Tensor& running_mean, Tensor& running_var, Tensor& save_mean,
                        Tensor& save_invstd, Tensor& y, float momentum, float eps) override;
  // Batch norm + ReLU in one cuDNN graph each way (cudnn_graphs.h). Where cuDNN has no engine
  // for the fused graphs, batch norm as above and then our ReLU kernels.
  bool fuses_batch_norm_relu(const OpTypes& types) const override;
  void plan_batch_norm(const BatchNormShape& bn) override;
  void batch_norm_relu_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                             Tensor& running_mean, Tensor& running_var, Tensor& save_mean,
                             Tensor& save_invstd, Tensor& y, float momentum, float eps) override;
  // Either of the two, with num_batches_tracked advanced by the running-statistics kernel.
  void batch_norm_train_counted(bool relu, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                Tensor& running_mean, Tensor& running_var, Tensor& save_mean,
                                Tensor& save_invstd, Tensor& y, float momentum, float eps,
                                Tensor* num_batches_tracked) override;
  void batch_norm_relu_backward(const Tensor& x, const Tensor& y, const Tensor& dy,
                                const Tensor& gamma, const Tensor& save_mean,
                                const Tensor& save_invstd, Tensor& dx, Tensor& dgamma,
                                Tensor& dbeta) override;
  void batch_norm_infer(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                        const Tensor& running_mean, const Tensor& running_var, Tensor& y,
                        float eps) override;
  void batch_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                           const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx,
                           Tensor& dgamma, Tensor& dbeta) override;

  void relu_forward(const Tensor& x, Tensor& y) override;
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) override;

  void pool_forward(const PoolDesc& p, const Tensor& x, Tensor& y) override;
  void pool_backward(const PoolDesc& p, const Tensor& x, const Tensor& y, const Tensor& dy,
                     Tensor& dx) override;
  // Max pooling keeps each output's argmax (int64, as PyTorch): backward reads one place per
  // window instead of searching it.
  bool saves_pool_argmax() const override { return true; }
  void max_pool_forward_argmax(const PoolDesc& p, const Tensor& x, Tensor& y,
                               Tensor& argmax) override;
  void max_pool_backward_argmax(const PoolDesc& p, const Tensor& argmax, const Tensor& dy,
                                Tensor& dx) override;
  void adaptive_avg_pool_forward(const Tensor& x, Tensor& y) override;
  void adaptive_avg_pool_backward(const Tensor& dy, Tensor& dx) override;

  void dropout_forward(const Tensor& x, float p, const DropoutSeed& seed, Tensor& mask,
                       Tensor& y) override;
  void dropout_backward(const Tensor& dy, const Tensor& mask, Tensor& dx) override;

  void add(const Tensor& a, const Tensor& b, Tensor& y) override;
  void accumulate(const Tensor& x, Tensor& y) override;

  // The logits in the activations' type; the probabilities and the loss in f32.
  void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor& probs,
                             Tensor& loss) override;
  void softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                      Tensor& dlogits) override;
  void softmax_cross_entropy_backward_scaled(const Tensor& probs, const Tensor& labels,
                                             const Tensor& scaler, Tensor& dlogits) override;

  void sgd_update(const SgdConfig& cfg, const Tensor& grad, Tensor& momentum_buf,
                  Tensor& param) override;
  void sgd_update_unscaled(const SgdConfig& cfg, const Tensor& grad, const Tensor& scaler,
                           Tensor& momentum_buf, Tensor& param) override;
  // The compute copy is written by the update's own kernel when it has the gradients' type (it
  // does under every precision policy); otherwise the update, then a cast.
  void sgd_update_with_copy(const SgdConfig& cfg, const Tensor& grad, const Tensor* scaler,
                            Tensor& momentum_buf, Tensor& param, Tensor& compute) override;
  // One launch per gradient type over a table of the group's pointers (MultiSgdUpdate), of up to
  // kSgdTableSlots parameters each; a compute copy of another type than its gradient (no
  // precision policy makes one) takes sgd_update_with_copy's path.
  void sgd_update_group(const SgdConfig& cfg, const std::vector<SgdParamRef>& group,
                        const Tensor* scaler) override;

  // The inf/NaN check over every gradient, on their stored bits.
  void find_non_finite(const Tensor& grads, Tensor& scaler) override;
  void update_loss_scale(const LossScaleConfig& cfg, Tensor& scaler) override;
  void increment(Tensor& counter) override;

  // The step as one CUDA graph (stream_capture.h): everything above queues on the one compute
  // stream, and nothing in a step waits for the device once its plans and workspace exist.
  std::string capture_unsupported() const override { return {}; }
  void begin_capture() override;
  std::unique_ptr<CapturedWork> end_capture() override;
  void abandon_capture() noexcept override;

 private:
  struct BnDims {
    int64_t n, c, inner;
    DType dtype;  // the data's (x, y and their gradients); the parameters and statistics are f32
    Layout layout;
    ChannelRows rows() const { return {c, inner, layout == Layout::kNHWC}; }
  };
  struct PoolGeo {
    Nchw in, out;
  };
  static Nchw nchw(const Tensor& t);
  static ChannelRows channel_rows(const Tensor& t);

  template <typename F>
  void run(int64_t n, const F& f) {
    NvtxRange range(F::kName);
    launch_for_each(stream(), n, f);
  }
  template <typename R>
  void reduce(int64_t channels, int64_t per_channel, int64_t parts, const R& r,
              typename R::Acc* out) {
    NvtxRange range(R::kName);
    launch_channel_reduce(stream(), channels, per_channel, parts, r, out);
  }
  // One element type, one layout and one element count.
  static void same(const Tensor& a, const Tensor& b, std::string_view what);
  // A counter's one int64 on the device (null: none).
  static int64_t* step_counter(const Tensor* counter);
  static void check_scaler(const Tensor& scaler);
  static BnDims bn_dims(const Tensor& x, const Tensor& gamma);
  static PoolGeo pool_geo(const Tensor& x, const Tensor& y);
  static void check_argmax(const PoolDesc& p, const Tensor& argmax, const Tensor& y);

  void loss_gradient(const Tensor& probs, const Tensor& labels, const float* scaler,
                     Tensor& dlogits);
  // The update over one parameter: f32 master weights and momentum, gradients of any storage.
  void sgd(const SgdConfig& cfg, const Tensor& grad, const Tensor* scaler, Tensor& momentum_buf,
           Tensor& param, Tensor* compute);
  // Parameters of one gradient type G, a launch per kSgdTableSlots of them.
  template <typename G>
  void sgd_table(const SgdConfig& cfg, const std::vector<SgdParamRef>& group, const Tensor* scaler);

  void run_conv(const ConvPlan& p, ConvPass pass, const PassOperands& op,
                std::initializer_list<const Tensor*> xwy);

  // Batch norm in training's operands, as the seam passes them; `count`: num_batches_tracked's
  // int64 on the device (null: not advanced).
  struct BnTrain {
    const Tensor& x;
    const Tensor& gamma;
    const Tensor& beta;
    Tensor& running_mean;
    Tensor& running_var;
    Tensor& save_mean;
    Tensor& save_invstd;
    Tensor& y;
    float momentum, eps;
    int64_t* count;
  };
  static BnDims bn_train_dims(const Tensor& x, const Tensor& gamma);
  void bn_train_graph(const BatchNormGraphs& g, const BnDims& d, const BnTrain& t);

  // The graphs of a batch-norm shape (with the ReLU or without), made on first use; null when
  // cuDNN has no engine for them on this device (then batch norm runs on our kernels, or, for
  // the fused pair, unfused; stderr says so once per shape).
  const BatchNormGraphs* bn_graphs(const BnDims& d, float eps, bool relu);
  // The graphs the forward pass made for this shape; backward does not depend on eps (it reads
  // the saved 1/sqrt(var + eps)), so any of this shape's serves. Null: cuDNN had no engine.
  const BatchNormGraphs* made_bn_graphs(const BnDims& d, bool relu) const;

  // Our kernels' scratch for a batch-norm shape: one accumulator per (channel, part) (a Welford
  // forward, a SumPair backward), then 4 doubles per channel.
  static size_t bn_kernel_scratch_bytes(const BnDims& d);
  // What a shape with no cuDNN graph takes: the kernels' sums in the workspace, or (with its
  // ReLU) the masked gradient's scratch.
  void reserve_bn_fallback(const BnDims& d, bool relu);
  void bn_train_kernels(const BnDims& d, const BnTrain& t);

  void bn_backward_kernels(const BnDims& d, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                           const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx,
                           Tensor& dgamma, Tensor& dbeta);

  // cuDNN's backward graph: dgamma and dbeta are f32 in the graph (as its scale and bias); a
  // 16-bit run's parameter gradients take them through f32 scratch and a cast of 2c values.
  void bn_backward_graph(const BatchNormGraphs& g, const BnDims& d, const Tensor& x,
                         const Tensor* y, const Tensor& dy, const Tensor& gamma,
                         const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx,
                         Tensor& dgamma, Tensor& dbeta);

  // Scratch for the batch-norm graphs: their own running statistics (4 * c floats, zeroed), then
  // a 16-bit run's dgamma and dbeta in f32 (2 * c).
  float* bn_scratch(int64_t c);

  DeviceInfo device_;
  BackendOptions options_;
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<EventClock> clock_;
  std::shared_ptr<LibraryHandles> handles_;
  cudnnHandle_t cudnn_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  PinnedStaging staging_;
  std::unique_ptr<InputCopies> inputs_;
  std::unique_ptr<SwapCopies> swaps_;
  // By (transposes, m, n, k, storage, compute type).
  std::map<std::tuple<bool, bool, int64_t, int64_t, int64_t, DType, cublasComputeType_t>,
           std::unique_ptr<MatmulPlan>>
      matmuls_;
  // By (n, c, h * w, the data's dtype and layout, with the ReLU, eps's bits).
  std::map<std::tuple<int64_t, int64_t, int64_t, DType, Layout, bool, uint32_t>,
           std::unique_ptr<BatchNormGraphs>>
      bn_by_shape_;
  // By conv_plan_key: the graphs and engines a convolution's plans share (after handles_, so
  // destroyed before it).
  std::map<std::string, std::shared_ptr<const ConvGraphs>> conv_graphs_;
  size_t bn_workspace_ = 0;
  Tensor bn_scratch_;
  Tensor relu_grad_scratch_;  // batch norm + relu without a fused graph: the masked gradient
};

}  // namespace dlb::cuda
