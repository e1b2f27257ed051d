#include "runtime/backend/cuda/cuda_backend.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

#include "runtime/backend/cuda/cuda_check.h"
#include "runtime/backend/cuda/cudnn_graphs.h"
#include "runtime/backend/cuda/device.h"
#include "runtime/backend/cuda/event_clock.h"
#include "runtime/backend/cuda/kernels.h"
#include "runtime/backend/cuda/launch.h"
#include "runtime/backend/cuda/library_check.h"
#include "runtime/backend/cuda/matmul_lt.h"
#include "runtime/backend/cuda/memory.h"
#include "runtime/backend/cuda/staging.h"
#include "runtime/core/error.h"
#include "runtime/core/nvtx.h"

namespace dlb::cuda {
namespace {

// cuBLASLt's workspace for matrix products: NVIDIA recommends 32 MiB on Hopper. A smaller
// --workspace-limit lowers it.
constexpr size_t kMatmulWorkspace = size_t{32} << 20;
// Autotuning without --workspace-limit considers engines up to this much workspace (some FFT
// engines ask for gigabytes); the tuning workspace is freed once the engines are chosen.
constexpr size_t kAutotuneWorkspaceCap = size_t{1} << 30;

// The library handles, shared by the backend and every plan made with them: a plan may outlive
// the backend (a graph's layers are destroyed after it), and its cuDNN execution plans must not
// outlive their handle.
struct LibraryHandles {
  cudnnHandle_t cudnn = nullptr;
  cublasLtHandle_t lt = nullptr;
  explicit LibraryHandles(cudaStream_t stream) {
    DLB_CUDNN_CHECK(cudnnCreate(&cudnn));
    DLB_CUDNN_CHECK(cudnnSetStream(cudnn, stream));
    DLB_CUBLAS_CHECK(cublasLtCreate(&lt));
  }
  ~LibraryHandles() {
    if (lt) cublasLtDestroy(lt);
    if (cudnn) cudnnDestroy(cudnn);
  }
  LibraryHandles(const LibraryHandles&) = delete;
  LibraryHandles& operator=(const LibraryHandles&) = delete;
};

void check_f32(const Tensor& t, std::string_view what) {
  if (t.dtype() != DType::kF32) {
    throw InvalidArgument(fmt::format("cuda: {} is {}, not f32", what, dtype_name(t.dtype())));
  }
}
void check_numel(const Tensor& t, int64_t n, std::string_view what) {
  if (t.numel() != n) {
    throw InvalidArgument(fmt::format("cuda: {} has {} elements, expected {}", what, t.numel(), n));
  }
}

// The NVTX range name of each kernel, so that an Nsight Systems timeline names every launch
// inside its layer's range.
template <typename F>
struct KernelName;
template <>
struct KernelName<Fill> {
  static constexpr const char* value = "fill";
};
template <>
struct KernelName<ReluForward> {
  static constexpr const char* value = "relu forward";
};
template <>
struct KernelName<ReluBackward> {
  static constexpr const char* value = "relu backward";
};
template <>
struct KernelName<Add> {
  static constexpr const char* value = "add";
};
template <>
struct KernelName<Accumulate> {
  static constexpr const char* value = "accumulate";
};
template <>
struct KernelName<DropoutForward> {
  static constexpr const char* value = "dropout forward";
};
template <>
struct KernelName<DropoutBackward> {
  static constexpr const char* value = "dropout backward";
};
template <>
struct KernelName<SgdUpdate> {
  static constexpr const char* value = "sgd update";
};
template <>
struct KernelName<SoftmaxCrossEntropyRow> {
  static constexpr const char* value = "softmax cross-entropy";
};
template <>
struct KernelName<MeanOfRows> {
  static constexpr const char* value = "loss mean";
};
template <>
struct KernelName<SoftmaxCrossEntropyBackward> {
  static constexpr const char* value = "softmax cross-entropy backward";
};
template <>
struct KernelName<AdaptiveAvgPoolForward> {
  static constexpr const char* value = "adaptive avg pool forward";
};
template <>
struct KernelName<AdaptiveAvgPoolBackward> {
  static constexpr const char* value = "adaptive avg pool backward";
};
template <>
struct KernelName<PoolForward> {
  static constexpr const char* value = "pool forward";
};
template <>
struct KernelName<PoolBackward> {
  static constexpr const char* value = "pool backward";
};
template <>
struct KernelName<BiasAdd> {
  static constexpr const char* value = "bias add";
};
template <>
struct KernelName<BiasRowSum> {
  static constexpr const char* value = "bias gradient rows";
};
template <>
struct KernelName<BiasChannelSum> {
  static constexpr const char* value = "bias gradient channels";
};
template <>
struct KernelName<BatchNormRunningUpdate> {
  static constexpr const char* value = "batch norm running statistics";
};
template <>
struct KernelName<BatchNormInfer> {
  static constexpr const char* value = "batch norm inference";
};

template <>
struct KernelName<BatchNormRowSum> {
  static constexpr const char* value = "batch norm row sums";
};
template <>
struct KernelName<BatchNormMean> {
  static constexpr const char* value = "batch norm mean";
};
template <>
struct KernelName<BatchNormRowSquares> {
  static constexpr const char* value = "batch norm row squares";
};
template <>
struct KernelName<BatchNormStatistics> {
  static constexpr const char* value = "batch norm statistics";
};
template <>
struct KernelName<BatchNormNormalize> {
  static constexpr const char* value = "batch norm normalize";
};
template <>
struct KernelName<BatchNormBackwardRowSums> {
  static constexpr const char* value = "batch norm backward row sums";
};
template <>
struct KernelName<BatchNormBackwardChannel> {
  static constexpr const char* value = "batch norm backward channels";
};
template <>
struct KernelName<BatchNormBackwardData> {
  static constexpr const char* value = "batch norm backward data";
};

class CudaConvPlan final : public ConvPlan {
 public:
  CudaConvPlan(const ConvDesc& d, std::unique_ptr<ConvGraphs> graphs,
               std::shared_ptr<LibraryHandles> handles)
      : ConvPlan(d), graphs_(std::move(graphs)), handles_(std::move(handles)) {}
  size_t workspace_bytes() const override {
    size_t most = 0;
    for (ConvPass p : kConvPasses) most = std::max(most, graphs_->chosen(p).workspace_bytes);
    return most;
  }
  std::vector<PassAlgorithm> algorithms() const override {
    std::vector<PassAlgorithm> out;
    for (ConvPass p : kConvPasses) out.push_back(graphs_->chosen(p));
    return out;
  }
  const ConvGraphs& graphs() const { return *graphs_; }

 private:
  std::unique_ptr<ConvGraphs> graphs_;
  std::shared_ptr<LibraryHandles> handles_;  // destroyed after graphs_
};

const CudaConvPlan& cuda_plan(const ConvPlan& p) {
  const auto* plan = dynamic_cast<const CudaConvPlan*>(&p);
  if (!plan) throw InvalidArgument("cuda: a convolution plan made by another backend");
  return *plan;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(const DeviceInfo& device, const BackendOptions& options)
      : Backend(std::make_shared<Allocator>(make_caching_device_memory_resource(device.index),
                                            options.memory_budget)),
        device_(device),
        options_(options) {
    DLB_CUDA_CHECK(cudaSetDevice(device_.index));
    stream_ = std::make_unique<Stream>();
    clock_ = std::make_unique<EventClock>(stream_->get());
    inputs_ = std::make_unique<InputCopies>(stream_->get());
    handles_ = std::make_shared<LibraryHandles>(stream_->get());
    cudnn_ = handles_->cudnn;
    lt_ = handles_->lt;
  }
  ~CudaBackend() override {
    cudaStreamSynchronize(stream_->get());  // no throwing in a destructor
    // Plans first, while the handles they were made with still exist.
    matmuls_.clear();
    bn_by_shape_.clear();
  }

  std::string_view name() const override { return "cuda"; }
  std::map<std::string, std::string> environment() const override {
    const size_t cudnn = cudnnGetVersion();
    return {{"device", device_.name},
            {"device_index", std::to_string(device_.index)},
            {"compute_capability", fmt::format("{}.{}", device_.sm_major, device_.sm_minor)},
            {"cudnn", fmt::format("{}.{}.{}", cudnn / 10000, (cudnn % 10000) / 100, cudnn % 100)},
            {"cublaslt", std::to_string(cublasLtGetVersion())},
            {"conv_algo", std::string(conv_algo_choice_name(options_.conv_algo))}};
  }

  // f32 data and parameters, with strict fp32 or TF32 math. fp16 and bf16 come with the
  // mixed-precision work.
  bool supports(Op, const OpTypes& t) const override {
    return (t.math == Precision::kFp32 || t.math == Precision::kTf32) && t.data == DType::kF32 &&
           t.params == DType::kF32;
  }

  void copy_from_host(const void* src, Tensor& dst) override {
    if (dst.bytes() == 0) return;
    staging_.copy(src, dst.raw(), dst.bytes(), stream_->get());
  }
  // Input batches go on a copy stream of their own: the trainer double-buffers them.
  bool async_input_copies() const override { return true; }
  CopyMarks copy_in(const void* src, Tensor& dst, const Mark& free) override {
    if (dst.bytes() == 0) return {clock_->mark(), clock_->mark()};
    // Without a mark of the compute stream (none yet, or a host clock's), the copy waits for
    // everything queued on it so far: `dst` may be memory that queued work still uses (the
    // caching allocator hands freed blocks back at once, and knows no streams but this one).
    const Mark queued = free.device ? free : clock_->mark();
    auto* after = static_cast<cudaEvent_t>(queued.device.get());
    const double now = clock_->now_us();
    auto [start, end] = inputs_->copy(src, dst.raw(), dst.bytes(), after);
    return {Mark{now, std::move(start)}, Mark{now, std::move(end)}};
  }
  void wait_for_input(const Mark& copied) override {
    if (copied.device) inputs_->wait(static_cast<cudaEvent_t>(copied.device.get()));
  }
  void copy_to_host(const Tensor& src, void* dst) override {
    if (src.bytes() == 0) return;
    DLB_CUDA_CHECK(
        cudaMemcpyAsync(dst, src.raw(), src.bytes(), cudaMemcpyDeviceToHost, stream_->get()));
    stream_->synchronize();  // `dst` is pageable and read as soon as this returns
  }
  void copy(const Tensor& src, Tensor& dst) override {
    if (src.bytes() != dst.bytes()) {
      throw InvalidArgument(fmt::format("copy: {} bytes into {} bytes", src.bytes(), dst.bytes()));
    }
    if (src.bytes() == 0) return;
    DLB_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.bytes(), cudaMemcpyDeviceToDevice,
                                   stream_->get()));
  }
  void fill(Tensor& t, float value) override {
    check_f32(t, "fill");
    run(t.numel(), Fill{t.data<float>(), value});
  }
  void synchronize() override { stream_->synchronize(); }
  StreamRef stream() const override { return {stream_->get()}; }
  const Clock& clock() const override { return *clock_; }

  std::unique_ptr<ConvPlan> make_conv_plan(const ConvDesc& d) override {
    require(Op::kConv, d.types);
    if (d.groups < 1 || d.in_channels % d.groups || d.out_channels % d.groups) {
      throw InvalidArgument(
          fmt::format("conv groups {} must divide {} input and {} output channels", d.groups,
                      d.in_channels, d.out_channels));
    }
    if (d.out_h() < 1 || d.out_w() < 1) {
      throw InvalidArgument(fmt::format("conv {}x{} on a {}x{} input has no output", d.kernel_h,
                                        d.kernel_w, d.height, d.width));
    }
    auto graphs = std::make_unique<ConvGraphs>(d, cudnn_);
    const EngineChoice choice{options_.conv_algo, options_.workspace_limit,
                              d.types.math == Precision::kTf32};
    PassOperands scratch[3]{};
    std::vector<Tensor> buffers;  // autotuning's operands and workspace, freed on return
    EngineChoice choice_made = choice;
    if (choice.how == ConvAlgoChoice::kAutotune) {
      if (!choice_made.workspace_limit) {
        choice_made.workspace_limit = kAutotuneWorkspaceCap;
        choice_made.limit_is_users = false;
      }
      // Zero-filled operands to time on, freed once the engines are chosen.
      for (const Shape& s :
           {Shape{d.batch, d.in_channels, d.height, d.width},
            Shape{d.out_channels, d.in_channels / d.groups, d.kernel_h, d.kernel_w},
            Shape{d.batch, d.out_channels, d.out_h(), d.out_w()}}) {
        buffers.push_back(empty(s, DType::kF32, MemCategory::kWorkspace, "autotune operands"));
        fill(buffers.back(), 0.f);
      }
      void* x = buffers[0].raw();
      void* w = buffers[1].raw();
      void* y = buffers[2].raw();
      scratch[0] = {x, w, y, d.bias ? w : nullptr};  // forward: y = conv(x, w) (+ a bias)
      scratch[1] = {y, w, x};                        // backward-data: dx = dgrad(dy, w)
      scratch[2] = {x, y, w};                        // backward-filter: dw = wgrad(x, dy)
    }
    Tensor tuning;  // one workspace for every pass's tuning, grown when a pass needs more
    graphs->choose_engines(cudnn_, choice_made, scratch, [&](size_t bytes) -> void* {
      const auto floats = static_cast<int64_t>(std::max<size_t>((bytes + 3) / 4, 1));
      if (!tuning.defined() || tuning.numel() < floats) {
        tuning = Tensor();  // released first, so the budget sees only the larger one
        tuning = empty(Shape{floats}, DType::kF32, MemCategory::kWorkspace, "autotune workspace");
      }
      return tuning.raw();
    });
    auto plan = std::make_unique<CudaConvPlan>(d, std::move(graphs), handles_);
    reserve_workspace(plan->workspace_bytes());
    return plan;
  }
  void conv_forward(const ConvPlan& plan, const Tensor& x, const Tensor& w, Tensor& y) override {
    if (cuda_plan(plan).graphs().bias_fused()) {
      throw InvalidArgument("cuda: a plan whose graph adds a bias runs through conv_bias_forward");
    }
    run_conv(plan, ConvPass::kForward, {x.raw(), w.raw(), y.raw()}, {&x, &w, &y});
  }
  // The bias is added in the forward graph's epilogue: no separate pass over y.
  void conv_bias_forward(const ConvPlan& plan, const Tensor& x, const Tensor& w, const Tensor& b,
                         Tensor& y) override {
    check_f32(b, "conv bias");
    check_numel(b, plan.desc().out_channels, "conv bias");
    if (cuda_plan(plan).graphs().bias_fused()) {
      run_conv(plan, ConvPass::kForward, {x.raw(), w.raw(), y.raw(), b.raw()}, {&x, &w, &y});
    } else {  // cuDNN had no engine for the fused graph
      run_conv(plan, ConvPass::kForward, {x.raw(), w.raw(), y.raw()}, {&x, &w, &y});
      bias_add(b, y);
    }
  }
  void conv_backward_data(const ConvPlan& plan, const Tensor& dy, const Tensor& w,
                          Tensor& dx) override {
    run_conv(plan, ConvPass::kBackwardData, {dy.raw(), w.raw(), dx.raw()}, {&dx, &w, &dy});
  }
  void conv_backward_filter(const ConvPlan& plan, const Tensor& x, const Tensor& dy,
                            Tensor& dw) override {
    run_conv(plan, ConvPass::kBackwardFilter, {x.raw(), dy.raw(), dw.raw()}, {&x, &dw, &dy});
  }

  void bias_add(const Tensor& b, Tensor& y) override {
    check_f32(b, "bias");
    check_f32(y, "bias output");
    const int64_t n = y.dim(0), c = y.dim(1);
    check_numel(b, c, "bias");
    run(y.numel(), BiasAdd{b.data<float>(), c, y.numel() / (n * c), y.data<float>()});
  }
  void bias_backward(const Tensor& dy, Tensor& db) override {
    check_f32(dy, "bias gradient input");
    check_f32(db, "bias gradient");
    const int64_t n = dy.dim(0), c = dy.dim(1);
    check_numel(db, c, "bias gradient");
    auto* rows = static_cast<double*>(workspace(static_cast<size_t>(n * c) * sizeof(double)));
    run(n * c, BiasRowSum{dy.data<float>(), dy.numel() / (n * c), rows});
    run(c, BiasChannelSum{rows, n, c, db.data<float>()});
  }

  void matmul(Precision math, bool trans_a, bool trans_b, float alpha, const Tensor& a,
              const Tensor& b, float beta, Tensor& c) override {
    for (const Tensor* t : std::initializer_list<const Tensor*>{&a, &b, &c})
      check_f32(*t, "matmul operand");
    const MatmulShape s = matmul_shape(trans_a, trans_b, a.shape(), b.shape(), c.shape());
    const bool tf32 = math == Precision::kTf32;
    auto key = std::make_tuple(s.trans_a, s.trans_b, s.m, s.n, s.k, tf32);
    auto it = matmuls_.find(key);
    if (it == matmuls_.end()) {
      const size_t limit =
          std::min(kMatmulWorkspace, options_.workspace_limit.value_or(kMatmulWorkspace));
      it = matmuls_.emplace(key, std::make_unique<MatmulPlan>(lt_, s, tf32, limit)).first;
    }
    const MatmulPlan& plan = *it->second;
    NvtxRange range("cublasLt matmul");
    plan.run(lt_, alpha, a.data<float>(), b.data<float>(), beta, c.data<float>(),
             workspace(plan.workspace_bytes()), stream_->get());
  }

  void batch_norm_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                        Tensor& running_mean, Tensor& running_var, Tensor& save_mean,
                        Tensor& save_invstd, Tensor& y, float momentum, float eps) override {
    const BnDims d = bn_train_dims(x, gamma);
    const BatchNormGraphs* g = bn_graphs(d, eps, false);
    if (!g) {  // cuDNN has no engine for this shape: our kernels
      bn_train_kernels(d, x, gamma, beta, running_mean, running_var, save_mean, save_invstd, y,
                       momentum, eps);
      return;
    }
    bn_train_graph(*g, d, x, gamma, beta, running_mean, running_var, save_mean, save_invstd, y,
                   momentum, eps);
  }
  // Batch norm + ReLU in one cuDNN graph each way (cudnn_graphs.h). Where cuDNN has no engine
  // for the fused graphs, batch norm as above and then our ReLU kernels.
  bool fuses_batch_norm_relu(const OpTypes& types) const override {
    return supports(Op::kBatchNorm, types);
  }
  void batch_norm_relu_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                             Tensor& running_mean, Tensor& running_var, Tensor& save_mean,
                             Tensor& save_invstd, Tensor& y, float momentum, float eps) override {
    const BnDims d = bn_train_dims(x, gamma);
    const BatchNormGraphs* g = bn_graphs(d, eps, true);
    if (!g) {
      batch_norm_train(x, gamma, beta, running_mean, running_var, save_mean, save_invstd, y,
                       momentum, eps);
      relu_forward(y, y);
      return;
    }
    bn_train_graph(*g, d, x, gamma, beta, running_mean, running_var, save_mean, save_invstd, y,
                   momentum, eps);
  }
  void batch_norm_relu_backward(const Tensor& x, const Tensor& y, const Tensor& dy,
                                const Tensor& gamma, const Tensor& save_mean,
                                const Tensor& save_invstd, Tensor& dx, Tensor& dgamma,
                                Tensor& dbeta) override {
    const BnDims d = bn_dims(x, gamma);
    same(x, y, "batch norm + relu backward");
    same(dy, y, "batch norm + relu backward");
    if (const BatchNormGraphs* g = made_bn_graphs(d, true)) {
      NvtxRange range("cudnn batch norm + relu backward");
      g->backward(cudnn_,
                  {x.raw(), y.raw(), dy.raw(), gamma.raw(), save_mean.raw(), save_invstd.raw(),
                   dx.raw(), dgamma.raw(), dbeta.raw()},
                  workspace(bn_workspace_));
      return;
    }
    // The mask into scratch (cuDNN's batch-norm graph is not promised dy and dx in one buffer).
    Tensor masked = relu_grad_scratch_.slice_flat(0, dy.numel()).reshaped(dy.shape());
    relu_backward(y, dy, masked);
    batch_norm_backward(x, masked, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
  }
  void batch_norm_infer(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                        const Tensor& running_mean, const Tensor& running_var, Tensor& y,
                        float eps) override {
    const BnDims d = bn_dims(x, gamma);
    run(x.numel(), BatchNormInfer{x.data<float>(), gamma.data<float>(), beta.data<float>(),
                                  running_mean.data<float>(), running_var.data<float>(), eps, d.c,
                                  d.inner, y.data<float>()});
  }
  void batch_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                           const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx,
                           Tensor& dgamma, Tensor& dbeta) override {
    const BnDims d = bn_dims(x, gamma);
    const BatchNormGraphs* g = made_bn_graphs(d, false);
    if (!g) {
      bn_backward_kernels(d, x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
      return;
    }
    NvtxRange range("cudnn batch norm backward");
    g->backward(cudnn_,
                {x.raw(), nullptr, dy.raw(), gamma.raw(), save_mean.raw(), save_invstd.raw(),
                 dx.raw(), dgamma.raw(), dbeta.raw()},
                workspace(bn_workspace_));
  }

  void relu_forward(const Tensor& x, Tensor& y) override {
    same(x, y, "relu");
    run(x.numel(), ReluForward{x.data<float>(), y.data<float>()});
  }
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) override {
    same(y, dx, "relu backward");
    same(dy, dx, "relu backward");
    run(y.numel(), ReluBackward{y.data<float>(), dy.data<float>(), dx.data<float>()});
  }

  void pool_forward(const PoolDesc& p, const Tensor& x, Tensor& y) override {
    const PoolGeo g = pool_geo(x, y);
    run(y.numel(), PoolForward{p, x.data<float>(), g.h, g.w, g.oh, g.ow, y.data<float>()});
  }
  void pool_backward(const PoolDesc& p, const Tensor& x, const Tensor& y, const Tensor& dy,
                     Tensor& dx) override {
    const PoolGeo g = pool_geo(x, y);
    same(x, dx, "pool backward");
    same(y, dy, "pool backward");
    run(dx.numel(),
        PoolBackward{p, x.data<float>(), dy.data<float>(), g.h, g.w, g.oh, g.ow, dx.data<float>()});
  }
  void adaptive_avg_pool_forward(const Tensor& x, Tensor& y) override {
    const PoolGeo g = pool_geo(x, y);
    run(y.numel(), AdaptiveAvgPoolForward{x.data<float>(), g.h, g.w, g.oh, g.ow, y.data<float>()});
  }
  void adaptive_avg_pool_backward(const Tensor& dy, Tensor& dx) override {
    const PoolGeo g = pool_geo(dx, dy);
    run(dx.numel(),
        AdaptiveAvgPoolBackward{dy.data<float>(), g.h, g.w, g.oh, g.ow, dx.data<float>()});
  }

  void dropout_forward(const Tensor& x, float p, uint64_t seed, Tensor& mask, Tensor& y) override {
    same(x, y, "dropout");
    same(x, mask, "dropout mask");
    if (!(p >= 0.f && p < 1.f)) {
      throw InvalidArgument(fmt::format("dropout probability must be in [0, 1) (got {})", p));
    }
    run(x.numel(), DropoutForward{x.data<float>(), p, seed, mask.data<float>(), y.data<float>()});
  }
  void dropout_backward(const Tensor& dy, const Tensor& mask, Tensor& dx) override {
    same(dy, dx, "dropout backward");
    same(mask, dx, "dropout backward");
    run(dy.numel(), DropoutBackward{dy.data<float>(), mask.data<float>(), dx.data<float>()});
  }

  void add(const Tensor& a, const Tensor& b, Tensor& y) override {
    same(a, y, "add");
    same(b, y, "add");
    run(y.numel(), Add{a.data<float>(), b.data<float>(), y.data<float>()});
  }
  void accumulate(const Tensor& x, Tensor& y) override {
    same(x, y, "accumulate");
    run(y.numel(), Accumulate{x.data<float>(), y.data<float>()});
  }

  void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor& probs,
                             Tensor& loss) override {
    check_f32(logits, "logits");
    same(logits, probs, "softmax probabilities");
    const int64_t rows = logits.dim(0), classes = logits.dim(1);
    if (labels.dtype() != DType::kI64) throw InvalidArgument("cuda: labels must be int64");
    check_numel(labels, rows, "labels");
    check_numel(loss, 1, "loss");
    auto* row_loss = static_cast<double*>(workspace(static_cast<size_t>(rows) * sizeof(double)));
    run(rows, SoftmaxCrossEntropyRow{logits.data<float>(), labels.data<int64_t>(), classes,
                                     probs.data<float>(), row_loss});
    run(1, MeanOfRows{row_loss, rows, loss.data<float>()});
  }
  void softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                      Tensor& dlogits) override {
    same(probs, dlogits, "softmax backward");
    const int64_t rows = probs.dim(0), classes = probs.dim(1);
    run(probs.numel(), SoftmaxCrossEntropyBackward{probs.data<float>(), labels.data<int64_t>(),
                                                   rows, classes, dlogits.data<float>()});
  }

  void sgd_update(const SgdConfig& cfg, const Tensor& grad, Tensor& momentum_buf,
                  Tensor& param) override {
    same(grad, param, "sgd");
    same(momentum_buf, param, "sgd momentum");
    run(param.numel(),
        SgdUpdate{cfg, grad.data<float>(), momentum_buf.data<float>(), param.data<float>()});
  }

 private:
  struct BnDims {
    int64_t n, c, inner;
  };
  struct PoolGeo {
    int64_t h, w, oh, ow;
  };

  template <typename F>
  void run(int64_t n, const F& f) {
    NvtxRange range(KernelName<F>::value);
    launch_for_each(stream(), n, f);
  }
  static void same(const Tensor& a, const Tensor& b, std::string_view what) {
    check_f32(a, what);
    check_f32(b, what);
    if (a.numel() != b.numel()) {
      throw InvalidArgument(
          fmt::format("cuda {}: {} and {} differ", what, a.shape().str(), b.shape().str()));
    }
  }
  static BnDims bn_dims(const Tensor& x, const Tensor& gamma) {
    check_f32(x, "batch norm input");
    const int64_t n = x.dim(0), c = x.dim(1);
    check_numel(gamma, c, "batch norm weight");
    return {n, c, x.numel() / (n * c)};
  }
  static PoolGeo pool_geo(const Tensor& x, const Tensor& y) {
    check_f32(x, "pool input");
    check_f32(y, "pool output");
    if (x.shape().rank() != 4 || y.shape().rank() != 4 || x.dim(0) != y.dim(0) ||
        x.dim(1) != y.dim(1)) {
      throw InvalidArgument(fmt::format("pool input {} and output {} differ in N or C",
                                        x.shape().str(), y.shape().str()));
    }
    return {x.dim(2), x.dim(3), y.dim(2), y.dim(3)};
  }

  void run_conv(const ConvPlan& p, ConvPass pass, const PassOperands& op,
                std::initializer_list<const Tensor*> xwy) {
    const CudaConvPlan& plan = cuda_plan(p);
    const ConvDesc& d = plan.desc();
    const Tensor* const* t = xwy.begin();
    check_numel(*t[0], d.batch * d.in_channels * d.height * d.width, "conv input");
    check_numel(*t[1], d.out_channels * (d.in_channels / d.groups) * d.kernel_h * d.kernel_w,
                "conv weight");
    check_numel(*t[2], d.batch * d.out_channels * d.out_h() * d.out_w(), "conv output");
    for (const Tensor* x : xwy) check_f32(*x, "conv operand");
    static constexpr const char* kRanges[] = {"cudnn conv forward", "cudnn conv backward-data",
                                              "cudnn conv backward-filter"};
    NvtxRange range(kRanges[static_cast<int>(pass)]);
    plan.graphs().execute(cudnn_, pass, op, workspace(plan.graphs().chosen(pass).workspace_bytes));
  }

  static BnDims bn_train_dims(const Tensor& x, const Tensor& gamma) {
    const BnDims d = bn_dims(x, gamma);
    if (d.n * d.inner < 2) {
      throw InvalidArgument(
          fmt::format("batch norm in training needs more than one value per channel (got input {})",
                      x.shape().str()));
    }
    return d;
  }
  void bn_train_graph(const BatchNormGraphs& g, const BnDims& d, const Tensor& x,
                      const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                      Tensor& running_var, Tensor& save_mean, Tensor& save_invstd, Tensor& y,
                      float momentum, float eps) {
    float* stats = bn_scratch(d.c);
    NvtxRange range("cudnn batch norm forward");
    g.forward(
        cudnn_,
        {x.raw(), gamma.raw(), beta.raw(), y.raw(), save_mean.raw(), save_invstd.raw(), stats},
        workspace(bn_workspace_));
    run(d.c, BatchNormRunningUpdate{save_mean.data<float>(), save_invstd.data<float>(), eps,
                                    momentum, d.n * d.inner, running_mean.data<float>(),
                                    running_var.data<float>()});
  }

  // The graphs of a batch-norm shape (with the ReLU or without), made on first use; null when
  // cuDNN has no engine for them on this device (then batch norm runs on our kernels, or, for
  // the fused pair, unfused; stderr says so once per shape).
  const BatchNormGraphs* bn_graphs(const BnDims& d, float eps, bool relu) {
    uint32_t eps_bits = 0;
    std::memcpy(&eps_bits, &eps, sizeof(eps_bits));
    const auto key = std::make_tuple(d.n, d.c, d.inner, relu, eps_bits);
    auto it = bn_by_shape_.find(key);
    if (it == bn_by_shape_.end()) {
      std::unique_ptr<BatchNormGraphs> g;
      // Made at the first forward (a warm-up step), so whatever falls back reserves its scratch
      // there, not in the timed steps.
      const auto fall_back = [&](const std::exception& e) {
        fmt::print(stderr, "dlbench: {}; batch norm{} over {}x{}x{} runs {}\n", e.what(),
                   relu ? " + relu" : "", d.n, d.c, d.inner,
                   relu ? "unfused" : "on dlbench's kernels");
        g.reset();
        if (relu) {  // the masked gradient
          const int64_t numel = d.n * d.c * d.inner;
          if (!relu_grad_scratch_.defined() || relu_grad_scratch_.numel() < numel) {
            relu_grad_scratch_ = empty(Shape{numel}, DType::kF32, MemCategory::kWorkspace,
                                       "batch norm + relu: masked gradient");
          }
        } else {  // the kernels' sums
          reserve_workspace(static_cast<size_t>(2 * d.n * d.c + 4 * d.c) * sizeof(double));
        }
      };
      try {
        g = std::make_unique<BatchNormGraphs>(d.n, d.c, d.inner, 1, eps, relu, cudnn_);
        bn_workspace_ = std::max(bn_workspace_, g->choose_engines(cudnn_));
        reserve_workspace(bn_workspace_);
      } catch (const Unsupported& e) {
        fall_back(e);
      } catch (const InvalidArgument& e) {
        // The fused pattern refused with another status: batch norm alone still has its path.
        if (!relu) throw;
        fall_back(e);
      }
      it = bn_by_shape_.emplace(key, std::move(g)).first;
    }
    return it->second.get();
  }
  // The graphs the forward pass made for this shape; backward does not depend on eps (it reads
  // the saved 1/sqrt(var + eps)), so any of this shape's serves. Null: cuDNN had no engine.
  const BatchNormGraphs* made_bn_graphs(const BnDims& d, bool relu) const {
    auto it = bn_by_shape_.lower_bound(std::make_tuple(d.n, d.c, d.inner, relu, uint32_t{0}));
    if (it == bn_by_shape_.end() || std::get<0>(it->first) != d.n ||
        std::get<1>(it->first) != d.c || std::get<2>(it->first) != d.inner ||
        std::get<3>(it->first) != relu) {
      throw InvalidArgument("cuda: batch norm backward before its forward pass");
    }
    return it->second.get();
  }

  void bn_train_kernels(const BnDims& d, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                        Tensor& running_mean, Tensor& running_var, Tensor& save_mean,
                        Tensor& save_invstd, Tensor& y, float momentum, float eps) {
    NvtxRange range("batch norm forward (kernels)");
    const int64_t rows = d.n * d.c, m = d.n * d.inner;
    auto* scratch = static_cast<double*>(workspace(static_cast<size_t>(2 * rows + 4 * d.c) * 8));
    double* row_sums = scratch;
    double* channel = scratch + 2 * rows;
    run(rows, BatchNormRowSum{x.data<float>(), d.inner, row_sums});
    run(d.c, BatchNormMean{row_sums, d.n, d.c, m, channel});
    run(rows, BatchNormRowSquares{x.data<float>(), channel, d.c, d.inner, row_sums});
    run(d.c,
        BatchNormStatistics{row_sums, gamma.data<float>(), beta.data<float>(), d.n, d.c, m, eps,
                            momentum, channel, save_mean.data<float>(), save_invstd.data<float>(),
                            running_mean.data<float>(), running_var.data<float>()});
    run(x.numel(), BatchNormNormalize{x.data<float>(), channel, d.c, d.inner, y.data<float>()});
  }

  void bn_backward_kernels(const BnDims& d, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                           const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx,
                           Tensor& dgamma, Tensor& dbeta) {
    NvtxRange range("batch norm backward (kernels)");
    const int64_t rows = d.n * d.c, m = d.n * d.inner;
    auto* scratch = static_cast<double*>(workspace(static_cast<size_t>(2 * rows + 4 * d.c) * 8));
    double* row_sums = scratch;
    double* channel = scratch + 2 * rows;
    run(rows, BatchNormBackwardRowSums{x.data<float>(), dy.data<float>(), save_mean.data<float>(),
                                       save_invstd.data<float>(), d.c, d.inner, row_sums});
    run(d.c, BatchNormBackwardChannel{row_sums, gamma.data<float>(), save_invstd.data<float>(), d.n,
                                      d.c, m, channel, dgamma.data<float>(), dbeta.data<float>()});
    run(x.numel(),
        BatchNormBackwardData{x.data<float>(), dy.data<float>(), save_mean.data<float>(),
                              save_invstd.data<float>(), channel, d.c, d.inner, dx.data<float>()});
  }

  // Scratch for the batch-norm graphs' own running statistics (4 * c floats, zeroed).
  float* bn_scratch(int64_t c) {
    if (!bn_scratch_.defined() || bn_scratch_.numel() < 4 * c) {
      bn_scratch_ = empty(Shape{4 * c}, DType::kF32, MemCategory::kWorkspace,
                          "batch-norm running-statistics scratch");
      fill(bn_scratch_, 0.f);
    }
    return bn_scratch_.data<float>();
  }

  DeviceInfo device_;
  BackendOptions options_;
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<EventClock> clock_;
  std::shared_ptr<LibraryHandles> handles_;
  cudnnHandle_t cudnn_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  PinnedStaging staging_;
  std::unique_ptr<InputCopies> inputs_;
  std::map<std::tuple<bool, bool, int64_t, int64_t, int64_t, bool>, std::unique_ptr<MatmulPlan>>
      matmuls_;
  // By (n, c, h * w, with the ReLU, eps's bits).
  std::map<std::tuple<int64_t, int64_t, int64_t, bool, uint32_t>, std::unique_ptr<BatchNormGraphs>>
      bn_by_shape_;
  size_t bn_workspace_ = 0;
  Tensor bn_scratch_;
  Tensor relu_grad_scratch_;  // batch norm + relu without a fused graph: the masked gradient
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& options) {
  const auto devices = query_devices();
  if (devices.empty()) {
    throw InvalidArgument(
        "--backend=cuda: no CUDA device is visible on this machine (no GPU, or no driver); run "
        "on a GPU machine or use --backend=cpu");
  }
  return std::make_unique<CudaBackend>(devices[options.device % static_cast<int>(devices.size())],
                                       options);
}

}  // namespace dlb::cuda
