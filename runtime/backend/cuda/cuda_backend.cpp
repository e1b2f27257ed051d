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
#include "runtime/backend/cuda/cudnn_version.h"
#include "runtime/backend/cuda/device.h"
#include "runtime/backend/cuda/event_clock.h"
#include "runtime/backend/cuda/kernels.h"
#include "runtime/backend/cuda/launch.h"
#include "runtime/backend/cuda/library_check.h"
#include "runtime/backend/cuda/matmul_lt.h"
#include "runtime/backend/cuda/memory.h"
#include "runtime/backend/cuda/staging.h"
#include "runtime/backend/cuda/stored.h"
#include "runtime/backend/cuda/stream_capture.h"
#include "runtime/core/error.h"
#include "runtime/core/nvtx.h"

static_assert(CUDNN_MAJOR >= 9, "the CUDA backend uses cuDNN 9's graph API and status codes");

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
void check_dtype(const Tensor& t, DType dtype, std::string_view what) {
  if (t.dtype() != dtype) {
    throw InvalidArgument(
        fmt::format("cuda: {} is {}, not {}", what, dtype_name(t.dtype()), dtype_name(dtype)));
  }
}
void check_numel(const Tensor& t, int64_t n, std::string_view what) {
  if (t.numel() != n) {
    throw InvalidArgument(fmt::format("cuda: {} has {} elements, expected {}", what, t.numel(), n));
  }
}

// How `from`'s elements (NCHW) map onto `to`'s: the identity for one layout, the channels-last
// places for an NCHW source and an NHWC destination of rank 4. The reverse is not needed (masters
// are NCHW) and is refused.
ToChannelsLast relayout(const Tensor& from, const Tensor& to, std::string_view what) {
  if (from.layout() == to.layout()) return {};
  if (from.layout() != Layout::kNCHW || from.shape().rank() != 4 || to.shape() != from.shape()) {
    throw Unsupported(fmt::format("cuda {}: from a {} {} into a {} {}", what,
                                  layout_name(from.layout()), from.shape().str(),
                                  layout_name(to.layout()), to.shape().str()));
  }
  return {from.dim(1), from.dim(2) * from.dim(3)};
}

// The elements of `t` as T, which must be its storage type (stored.h).
template <typename T>
T* as(const Tensor& t) {
  if (t.dtype() != StorageDType<T>::value) {
    throw InvalidArgument(fmt::format("cuda: a {} tensor read as {}", dtype_name(t.dtype()),
                                      dtype_name(StorageDType<T>::value)));
  }
  return static_cast<T*>(t.raw());
}

class CudaConvPlan final : public ConvPlan {
 public:
  // `shared`: the graphs were made for an earlier plan of the same conv_plan_key.
  CudaConvPlan(const ConvDesc& d, std::shared_ptr<const ConvGraphs> graphs, bool shared,
               std::shared_ptr<LibraryHandles> handles)
      : ConvPlan(d), handles_(std::move(handles)), graphs_(std::move(graphs)), shared_(shared) {}
  size_t workspace_bytes() const override {
    size_t most = 0;
    for (ConvPass p : kConvPasses) most = std::max(most, graphs_->chosen(p).workspace_bytes);
    return most;
  }
  std::vector<PassAlgorithm> algorithms() const override {
    std::vector<PassAlgorithm> out;
    for (ConvPass p : kConvPasses) {
      out.push_back(graphs_->chosen(p));
      out.back().shared = shared_;
    }
    return out;
  }
  const ConvGraphs& graphs() const { return *graphs_; }

 private:
  std::shared_ptr<LibraryHandles> handles_;  // declared first: destroyed after graphs_
  std::shared_ptr<const ConvGraphs> graphs_;
  bool shared_ = false;
};

const CudaConvPlan& cuda_plan(const ConvPlan& p) {
  const auto* plan = dynamic_cast<const CudaConvPlan*>(&p);
  if (!plan) throw InvalidArgument("cuda: a convolution plan made by another backend");
  return *plan;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(const DeviceInfo& device, const BackendOptions& options)
      : Backend(make_allocator(make_caching_device_memory_resource(device.index), options)),
        device_(device),
        options_(options) {
    if (options.conv_algo != ConvAlgoChoice::kHeuristic &&
        options.conv_algo != ConvAlgoChoice::kAutotune) {
      throw Unsupported(fmt::format(
          "--conv-algo={} is a cpu backend algorithm; the cuda backend chooses cuDNN engines by "
          "heuristic or autotune",
          conv_algo_choice_name(options.conv_algo)));
    }
    if (const std::string why = cudnn_incompatibility(cudnn_version_from(cudnnGetVersion()),
                                                      cudnn_version_from(CUDNN_VERSION));
        !why.empty()) {
      throw Unsupported("--backend=cuda: " + why);
    }
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
    conv_graphs_.clear();
  }

  std::string_view name() const override { return "cuda"; }
  std::map<std::string, std::string> environment() const override {
    return {
        {"device", device_.name},
        {"device_index", std::to_string(device_.index)},
        {"compute_capability", fmt::format("{}.{}", device_.sm_major, device_.sm_minor)},
        // The machine's cuDNN (PyTorch's pip package's, on a GPU machine, may come first) and the
        // headers dlbench was built with: an older minor release was refused at start-up.
        {"cudnn", cudnn_version_from(cudnnGetVersion()).str()},
        {"cudnn_built_with", cudnn_version_from(CUDNN_VERSION).str()},
        {"cublaslt", std::to_string(cublasLtGetVersion())},
        {"conv_algo", std::string(conv_algo_choice_name(options_.conv_algo))},
        {"activation_layout", "NCHW for fp32 and tf32, NHWC (channels last) for fp16 and bf16"}};
  }

  // Data and parameters in f32, fp16 or bf16 storage (stored.h; batch norm's parameters, the
  // probabilities and the optimizer's state stay f32 in a 16-bit run). Strict fp32 or TF32 math
  // on f32 data; 16-bit data uses tensor-op math (cuDNN's and cuBLASLt's), accumulating in f32.
  bool supports(Op, const OpTypes& t) const override {
    const auto stored = [](DType d) {
      return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16;
    };
    return stored(t.data) && stored(t.params) &&
           (t.math != Precision::kTf32 || t.data == DType::kF32);
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
    with_storage(t.dtype(), "fill", [&](auto tag) {
      using T = decltype(tag);
      run(t.numel(), Fill<T>{as<T>(t), stored<T>(value)});
    });
  }
  // Into a channels-last destination from an NCHW source (a conv weight's master into its
  // 16-bit copy), the elements move to their channels-last places.
  void cast(const Tensor& src, Tensor& dst) override {
    check_numel(dst, src.numel(), "cast output");
    const ToChannelsLast to = relayout(src, dst, "cast");
    with_storage(src.dtype(), "cast input", [&](auto s) {
      using S = decltype(s);
      with_storage(dst.dtype(), "cast output", [&](auto d) {
        using D = decltype(d);
        run(src.numel(), Cast<S, D>{as<S>(src), as<D>(dst), to});
      });
    });
  }
  // The 16-bit activations of a mixed-precision run are channels-last (NHWC): cuDNN's tensor-core
  // engines work in it natively, and PyTorch's AMP recommends it for convolutional networks.
  Layout activation_layout(const OpTypes& types) const override {
    return types.data == DType::kF16 || types.data == DType::kBF16 ? Layout::kNHWC : Layout::kNCHW;
  }
  // Everything queued: the compute stream's work and the input copies' (first seen on an H100,
  // results/device/: a copy still in flight after synchronize()).
  void synchronize() override {
    stream_->synchronize();
    inputs_->synchronize();
  }
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
    // Layers of the same shape share graphs and engines (as PyTorch's BenchmarkCache keys its
    // plans by the convolution's parameters): resnet50's 53 convolutions need far fewer.
    const std::string key = conv_plan_key(d);
    if (auto it = conv_graphs_.find(key); it != conv_graphs_.end()) {
      return std::make_unique<CudaConvPlan>(d, it->second, true, handles_);
    }
    auto graphs = std::make_shared<ConvGraphs>(d, cudnn_);
    // Tensor-op math for tf32 and for 16-bit data; strict fp32 keeps to FMA engines.
    const EngineChoice choice = conv_engine_choice(options_, d.types);
    PassOperands scratch[3]{};
    std::vector<Tensor> buffers;  // autotuning's operands and workspace, freed on return
    EngineChoice choice_made = choice;
    if (choice.how == ConvAlgoChoice::kAutotune) {
      if (!choice_made.workspace_limit) {
        choice_made.workspace_limit = kAutotuneWorkspaceCap;
        choice_made.limit_is_users = false;
      }
      // Zero-filled operands to time on, freed once the engines are chosen.
      const std::pair<Shape, DType> operands[] = {
          {Shape{d.batch, d.in_channels, d.height, d.width}, d.types.data},
          {Shape{d.out_channels, d.in_channels / d.groups, d.kernel_h, d.kernel_w}, d.types.params},
          {Shape{d.batch, d.out_channels, d.out_h(), d.out_w()}, d.types.data}};
      for (const auto& [shape, dtype] : operands) {
        buffers.push_back(empty(shape, dtype, MemCategory::kWorkspace, "autotune operands"));
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
    auto plan = std::make_unique<CudaConvPlan>(d, graphs, false, handles_);
    reserve_workspace(plan->workspace_bytes());
    conv_graphs_.emplace(key, std::move(graphs));
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
    check_dtype(b, plan.desc().types.params, "conv bias");
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
    check_numel(b, y.dim(1), "bias");
    with_storage(y.dtype(), "bias output", [&](auto tag) {
      using T = decltype(tag);
      run(y.numel(), BiasAdd<T>{as<T>(b), channel_rows(y), as<T>(y)});
    });
  }
  void bias_backward(const Tensor& dy, Tensor& db) override {
    const int64_t n = dy.dim(0), c = dy.dim(1);
    check_numel(db, c, "bias gradient");
    const ChannelRows layout = channel_rows(dy);
    const int64_t lanes = bias_lanes(n, c, layout.inner);
    auto* partials =
        static_cast<double*>(workspace(static_cast<size_t>(n * c * (lanes + 1)) * sizeof(double)));
    double* rows = partials + n * c * lanes;
    with_storage(dy.dtype(), "bias gradient input", [&](auto tag) {
      using T = decltype(tag);
      run(n * c * lanes, BiasPartialSums<T>{as<T>(dy), layout, lanes, partials});
      run(n * c, BiasLaneSum{partials, c, lanes, rows});
      run(c, BiasChannelSum<T>{rows, n, c, as<T>(db)});
    });
  }

  void matmul(Precision math, bool trans_a, bool trans_b, float alpha, const Tensor& a,
              const Tensor& b, float beta, Tensor& c) override {
    const DType dtype = a.dtype();
    for (const Tensor* t : std::initializer_list<const Tensor*>{&b, &c})
      check_dtype(*t, dtype, "matmul operand");
    const MatmulShape s = matmul_shape(trans_a, trans_b, a.shape(), b.shape(), c.shape());
    const MatmulTypes types = matmul_types(dtype, math);
    auto key = std::make_tuple(s.trans_a, s.trans_b, s.m, s.n, s.k, dtype, types.compute);
    auto it = matmuls_.find(key);
    if (it == matmuls_.end()) {
      const size_t limit =
          std::min(kMatmulWorkspace, options_.workspace_limit.value_or(kMatmulWorkspace));
      it = matmuls_
               .emplace(key, std::make_unique<MatmulPlan>(
                                 lt_, s, types, limit,
                                 // the user's limit, unless above our own cap
                                 options_.workspace_limit &&
                                     *options_.workspace_limit <= kMatmulWorkspace))
               .first;
    }
    const MatmulPlan& plan = *it->second;
    NvtxRange range("cublasLt matmul");
    plan.run(lt_, alpha, a.raw(), b.raw(), beta, c.raw(), workspace(plan.workspace_bytes()),
             stream_->get());
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
      bn_backward_graph(*g, d, x, &y, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
      return;
    }
    // The mask into scratch (cuDNN's batch-norm graph is not promised dy and dx in one buffer).
    Tensor masked =
        relu_grad_scratch_.slice_flat(0, dy.numel()).reshaped(dy.shape()).with_layout(dy.layout());
    relu_backward(y, dy, masked);
    batch_norm_backward(x, masked, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
  }
  void batch_norm_infer(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                        const Tensor& running_mean, const Tensor& running_var, Tensor& y,
                        float eps) override {
    const BnDims d = bn_dims(x, gamma);
    same(x, y, "batch norm inference");
    with_storage(x.dtype(), "batch norm input", [&](auto tag) {
      using T = decltype(tag);
      run(x.numel(), BatchNormInfer<T>{as<T>(x), gamma.data<float>(), beta.data<float>(),
                                       running_mean.data<float>(), running_var.data<float>(), eps,
                                       d.rows(), as<T>(y)});
    });
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
    bn_backward_graph(*g, d, x, nullptr, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
  }

  void relu_forward(const Tensor& x, Tensor& y) override {
    same(x, y, "relu");
    with_storage(x.dtype(), "relu input", [&](auto tag) {
      using T = decltype(tag);
      run(x.numel(), ReluForward<T>{as<T>(x), as<T>(y)});
    });
  }
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) override {
    same(y, dx, "relu backward");
    same(dy, dx, "relu backward");
    with_storage(y.dtype(), "relu output", [&](auto tag) {
      using T = decltype(tag);
      run(y.numel(), ReluBackward<T>{as<T>(y), as<T>(dy), as<T>(dx)});
    });
  }

  void pool_forward(const PoolDesc& p, const Tensor& x, Tensor& y) override {
    const PoolGeo g = pool_geo(x, y);
    with_storage(x.dtype(), "pool input", [&](auto tag) {
      using T = decltype(tag);
      run(y.numel(), PoolForward<T>{p, as<T>(x), g.in, g.out, as<T>(y)});
    });
  }
  void pool_backward(const PoolDesc& p, const Tensor& x, const Tensor& y, const Tensor& dy,
                     Tensor& dx) override {
    const PoolGeo g = pool_geo(x, y);
    same(x, dx, "pool backward");
    same(y, dy, "pool backward");
    with_storage(x.dtype(), "pool input", [&](auto tag) {
      using T = decltype(tag);
      run(dx.numel(), PoolBackward<T>{p, as<T>(x), as<T>(dy), g.in, g.out, as<T>(dx)});
    });
  }
  void adaptive_avg_pool_forward(const Tensor& x, Tensor& y) override {
    const PoolGeo g = pool_geo(x, y);
    with_storage(x.dtype(), "pool input", [&](auto tag) {
      using T = decltype(tag);
      run(y.numel(), AdaptiveAvgPoolForward<T>{as<T>(x), g.in, g.out, as<T>(y)});
    });
  }
  void adaptive_avg_pool_backward(const Tensor& dy, Tensor& dx) override {
    const PoolGeo g = pool_geo(dx, dy);
    with_storage(dx.dtype(), "pool gradient", [&](auto tag) {
      using T = decltype(tag);
      run(dx.numel(), AdaptiveAvgPoolBackward<T>{as<T>(dy), g.in, g.out, as<T>(dx)});
    });
  }

  void dropout_forward(const Tensor& x, float p, const DropoutSeed& seed, Tensor& mask,
                       Tensor& y) override {
    same(x, y, "dropout");
    same(x, mask, "dropout mask");
    if (!(p >= 0.f && p < 1.f)) {
      throw InvalidArgument(fmt::format("dropout probability must be in [0, 1) (got {})", p));
    }
    with_storage(x.dtype(), "dropout input", [&](auto tag) {
      using T = decltype(tag);
      run(x.numel(), DropoutForward<T>{as<T>(x), p, seed.base, step_counter(seed.step), as<T>(mask),
                                       as<T>(y)});
    });
  }
  void dropout_backward(const Tensor& dy, const Tensor& mask, Tensor& dx) override {
    same(dy, dx, "dropout backward");
    same(mask, dx, "dropout backward");
    with_storage(dy.dtype(), "dropout gradient", [&](auto tag) {
      using T = decltype(tag);
      run(dy.numel(), DropoutBackward<T>{as<T>(dy), as<T>(mask), as<T>(dx)});
    });
  }

  void add(const Tensor& a, const Tensor& b, Tensor& y) override {
    same(a, y, "add");
    same(b, y, "add");
    with_storage(y.dtype(), "add", [&](auto tag) {
      using T = decltype(tag);
      run(y.numel(), Add<T>{as<T>(a), as<T>(b), as<T>(y)});
    });
  }
  void accumulate(const Tensor& x, Tensor& y) override {
    same(x, y, "accumulate");
    with_storage(y.dtype(), "accumulate", [&](auto tag) {
      using T = decltype(tag);
      run(y.numel(), Accumulate<T>{as<T>(x), as<T>(y)});
    });
  }

  // The logits in the activations' type; the probabilities and the loss in f32.
  void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor& probs,
                             Tensor& loss) override {
    check_f32(probs, "softmax probabilities");
    check_f32(loss, "loss");
    check_numel(probs, logits.numel(), "softmax probabilities");
    const int64_t rows = logits.dim(0), classes = logits.dim(1);
    if (labels.dtype() != DType::kI64) throw InvalidArgument("cuda: labels must be int64");
    check_numel(labels, rows, "labels");
    check_numel(loss, 1, "loss");
    auto* row_loss = static_cast<double*>(workspace(static_cast<size_t>(rows) * sizeof(double)));
    with_storage(logits.dtype(), "logits", [&](auto tag) {
      using T = decltype(tag);
      run(rows, SoftmaxCrossEntropyRow<T>{as<T>(logits), labels.data<int64_t>(), classes,
                                          probs.data<float>(), row_loss});
    });
    run(1, MeanOfRows{row_loss, rows, loss.data<float>()});
  }
  void softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                      Tensor& dlogits) override {
    loss_gradient(probs, labels, nullptr, dlogits);
  }
  void softmax_cross_entropy_backward_scaled(const Tensor& probs, const Tensor& labels,
                                             const Tensor& scaler, Tensor& dlogits) override {
    check_scaler(scaler);
    loss_gradient(probs, labels, scaler.data<float>(), dlogits);
  }

  void sgd_update(const SgdConfig& cfg, const Tensor& grad, Tensor& momentum_buf,
                  Tensor& param) override {
    sgd(cfg, grad, nullptr, momentum_buf, param, nullptr);
  }
  void sgd_update_unscaled(const SgdConfig& cfg, const Tensor& grad, const Tensor& scaler,
                           Tensor& momentum_buf, Tensor& param) override {
    check_scaler(scaler);
    sgd(cfg, grad, &scaler, momentum_buf, param, nullptr);
  }
  // The compute copy is written by the update's own kernel when it has the gradients' type (it
  // does under every precision policy); otherwise the update, then a cast.
  void sgd_update_with_copy(const SgdConfig& cfg, const Tensor& grad, const Tensor* scaler,
                            Tensor& momentum_buf, Tensor& param, Tensor& compute) override {
    if (compute.dtype() != grad.dtype()) {
      Backend::sgd_update_with_copy(cfg, grad, scaler, momentum_buf, param, compute);
      return;
    }
    if (scaler) check_scaler(*scaler);
    sgd(cfg, grad, scaler, momentum_buf, param, &compute);
  }

  // The inf/NaN check over every gradient, on their stored bits.
  void find_non_finite(const Tensor& grads, Tensor& scaler) override {
    check_scaler(scaler);
    with_storage(grads.dtype(), "gradients", [&](auto tag) {
      using T = decltype(tag);
      run(grads.numel(), FindNonFinite<T>{as<T>(grads), scaler.data<float>()});
    });
  }
  void update_loss_scale(const LossScaleConfig& cfg, Tensor& scaler) override {
    check_scaler(scaler);
    run(1, UpdateLossScale{cfg, scaler.data<float>()});
  }
  void increment(Tensor& counter) override { run(1, Increment{step_counter(&counter)}); }

  // The step as one CUDA graph (stream_capture.h): everything above queues on the one compute
  // stream, and nothing in a step waits for the device once its plans and workspace exist.
  std::string capture_unsupported() const override { return {}; }
  void begin_capture() override { begin_stream_capture(stream_->get()); }
  std::unique_ptr<CapturedWork> end_capture() override {
    return end_stream_capture(stream_->get());
  }
  void abandon_capture() noexcept override { abandon_stream_capture(stream_->get()); }

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
  static Nchw nchw(const Tensor& t) {
    return {t.dim(1), t.dim(2), t.dim(3), t.layout() == Layout::kNHWC};
  }
  static ChannelRows channel_rows(const Tensor& t) {
    const int64_t n = t.dim(0), c = t.dim(1);
    return {c, t.numel() / (n * c), t.layout() == Layout::kNHWC};
  }

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
  static void same(const Tensor& a, const Tensor& b, std::string_view what) {
    check_dtype(b, a.dtype(), what);
    if (a.layout() != b.layout()) {
      throw InvalidArgument(fmt::format("cuda {}: one tensor is {}, the other {}", what,
                                        layout_name(a.layout()), layout_name(b.layout())));
    }
    if (a.numel() != b.numel()) {
      throw InvalidArgument(
          fmt::format("cuda {}: {} and {} differ", what, a.shape().str(), b.shape().str()));
    }
  }
  // A counter's one int64 on the device (null: none).
  static int64_t* step_counter(const Tensor* counter) {
    if (!counter) return nullptr;
    check_dtype(*counter, DType::kI64, "counter");
    check_numel(*counter, 1, "counter");
    return counter->data<int64_t>();
  }
  static void check_scaler(const Tensor& scaler) {
    check_f32(scaler, "loss-scale state");
    check_numel(scaler, kLossScaleSlots, "loss-scale state");
  }
  static BnDims bn_dims(const Tensor& x, const Tensor& gamma) {
    check_f32(gamma, "batch norm weight");
    const int64_t n = x.dim(0), c = x.dim(1);
    check_numel(gamma, c, "batch norm weight");
    return {n, c, x.numel() / (n * c), x.dtype(), x.layout()};
  }
  static PoolGeo pool_geo(const Tensor& x, const Tensor& y) {
    check_dtype(y, x.dtype(), "pool output");
    if (x.shape().rank() != 4 || y.shape().rank() != 4 || x.dim(0) != y.dim(0) ||
        x.dim(1) != y.dim(1)) {
      throw InvalidArgument(fmt::format("pool input {} and output {} differ in N or C",
                                        x.shape().str(), y.shape().str()));
    }
    return {nchw(x), nchw(y)};
  }

  void loss_gradient(const Tensor& probs, const Tensor& labels, const float* scaler,
                     Tensor& dlogits) {
    check_f32(probs, "softmax probabilities");
    check_numel(dlogits, probs.numel(), "logits gradient");
    const int64_t rows = probs.dim(0), classes = probs.dim(1);
    with_storage(dlogits.dtype(), "logits gradient", [&](auto tag) {
      using T = decltype(tag);
      run(probs.numel(), SoftmaxCrossEntropyBackward<T>{probs.data<float>(), labels.data<int64_t>(),
                                                        scaler, rows, classes, as<T>(dlogits)});
    });
  }
  // The update over one parameter: f32 master weights and momentum, gradients of any storage.
  void sgd(const SgdConfig& cfg, const Tensor& grad, const Tensor* scaler, Tensor& momentum_buf,
           Tensor& param, Tensor* compute) {
    check_f32(param, "sgd master weights");
    check_f32(momentum_buf, "sgd momentum");
    check_numel(grad, param.numel(), "sgd gradient");
    check_numel(momentum_buf, param.numel(), "sgd momentum");
    if (compute) same(grad, *compute, "sgd compute copy");
    // A conv weight's gradient (and copy) may be channels-last; its master is torchvision's NCHW.
    const ToChannelsLast to = relayout(param, grad, "sgd gradient");
    const float* state = scaler ? scaler->data<float>() : nullptr;
    with_storage(grad.dtype(), "sgd gradient", [&](auto tag) {
      using G = decltype(tag);
      run(param.numel(),
          SgdUpdate<G>{cfg, as<G>(grad), state, momentum_buf.data<float>(), param.data<float>(),
                       compute ? as<G>(*compute) : nullptr, to});
    });
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
    check_dtype(*t[0], d.types.data, "conv activation");
    check_dtype(*t[1], d.types.params, "conv weight");
    check_dtype(*t[2], d.types.data, "conv activation");
    for (const Tensor* x : xwy) {
      if (x->layout() != d.layout) {
        throw Unsupported(fmt::format("cuda: a convolution planned {} got a {} operand",
                                      layout_name(d.layout), layout_name(x->layout())));
      }
    }
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
    const auto key = std::make_tuple(d.n, d.c, d.inner, d.dtype, d.layout, relu, eps_bits);
    auto it = bn_by_shape_.find(key);
    if (it == bn_by_shape_.end()) {
      std::unique_ptr<BatchNormGraphs> g;
      // Made at the first forward (a warm-up step), so whatever falls back reserves its scratch
      // there, not in the timed steps.
      const auto fall_back = [&](const std::exception& e) {
        // The message's first line: cuDNN's call trace that follows it is for a bug report.
        const std::string why(e.what());
        fmt::print(stderr, "dlbench: {}; batch norm{} over {}x{}x{} runs {}\n",
                   why.substr(0, why.find('\n')), relu ? " + relu" : "", d.n, d.c, d.inner,
                   relu ? "unfused" : "on dlbench's kernels");
        g.reset();
        if (relu) {  // the masked gradient
          const int64_t numel = d.n * d.c * d.inner;
          if (!relu_grad_scratch_.defined() || relu_grad_scratch_.numel() < numel ||
              relu_grad_scratch_.dtype() != d.dtype) {
            relu_grad_scratch_ = Tensor();  // released first, so the budget sees one of them
            scratch_moved();
            relu_grad_scratch_ = empty(Shape{numel}, d.dtype, MemCategory::kWorkspace,
                                       "batch norm + relu: masked gradient");
          }
        } else {  // the kernels' sums
          reserve_workspace(bn_kernel_scratch_bytes(d));
        }
      };
      try {
        g = std::make_unique<BatchNormGraphs>(d.n, d.c, d.inner, 1, d.dtype, d.layout, eps, relu,
                                              cudnn_);
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
    auto it = bn_by_shape_.lower_bound(
        std::make_tuple(d.n, d.c, d.inner, d.dtype, d.layout, relu, uint32_t{0}));
    if (it == bn_by_shape_.end() || std::get<0>(it->first) != d.n ||
        std::get<1>(it->first) != d.c || std::get<2>(it->first) != d.inner ||
        std::get<3>(it->first) != d.dtype || std::get<4>(it->first) != d.layout ||
        std::get<5>(it->first) != relu) {
      throw InvalidArgument("cuda: batch norm backward before its forward pass");
    }
    return it->second.get();
  }

  // Our kernels' scratch for a batch-norm shape: one accumulator per (channel, part) (a Welford
  // forward, a SumPair backward), then 4 doubles per channel.
  static size_t bn_kernel_scratch_bytes(const BnDims& d) {
    const int64_t parts = reduce_parts(d.c, d.n * d.inner);
    return static_cast<size_t>(d.c * parts) * sizeof(Welford) +
           static_cast<size_t>(4 * d.c) * sizeof(double);
  }
  void bn_train_kernels(const BnDims& d, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                        Tensor& running_mean, Tensor& running_var, Tensor& save_mean,
                        Tensor& save_invstd, Tensor& y, float momentum, float eps) {
    NvtxRange range("batch norm forward (kernels)");
    const int64_t m = d.n * d.inner, parts = reduce_parts(d.c, m);
    auto* moments = static_cast<Welford*>(workspace(bn_kernel_scratch_bytes(d)));
    auto* channel = reinterpret_cast<double*>(moments + d.c * parts);
    with_storage(d.dtype, "batch norm input", [&](auto tag) {
      using T = decltype(tag);
      reduce(d.c, m, parts, BatchNormMoments<T>{as<T>(x), d.rows()}, moments);
      run(d.c,
          BatchNormStatistics{moments, parts, gamma.data<float>(), beta.data<float>(), eps,
                              momentum, channel, save_mean.data<float>(), save_invstd.data<float>(),
                              running_mean.data<float>(), running_var.data<float>()});
      run(x.numel(), BatchNormNormalize<T>{as<T>(x), channel, d.rows(), as<T>(y)});
    });
  }

  void bn_backward_kernels(const BnDims& d, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                           const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx,
                           Tensor& dgamma, Tensor& dbeta) {
    NvtxRange range("batch norm backward (kernels)");
    const int64_t m = d.n * d.inner, parts = reduce_parts(d.c, m);
    auto* sums = static_cast<SumPair*>(workspace(bn_kernel_scratch_bytes(d)));
    auto* channel = reinterpret_cast<double*>(sums + d.c * parts);
    check_dtype(dbeta, dgamma.dtype(), "batch norm bias gradient");
    with_storage(d.dtype, "batch norm input", [&](auto tag) {
      using T = decltype(tag);
      reduce(d.c, m, parts,
             BatchNormBackwardSums<T>{as<T>(x), as<T>(dy), save_mean.data<float>(),
                                      save_invstd.data<float>(), d.rows()},
             sums);
      with_storage(dgamma.dtype(), "batch norm weight gradient", [&](auto gtag) {
        using G = decltype(gtag);
        run(d.c, BatchNormBackwardChannel<G>{sums, parts, m, gamma.data<float>(),
                                             save_invstd.data<float>(), channel, as<G>(dgamma),
                                             as<G>(dbeta)});
      });
      run(x.numel(),
          BatchNormBackwardData<T>{as<T>(x), as<T>(dy), save_mean.data<float>(),
                                   save_invstd.data<float>(), channel, d.rows(), as<T>(dx)});
    });
  }

  // cuDNN's backward graph: dgamma and dbeta are f32 in the graph (as its scale and bias); a
  // 16-bit run's parameter gradients take them through f32 scratch and a cast of 2c values.
  void bn_backward_graph(const BatchNormGraphs& g, const BnDims& d, const Tensor& x,
                         const Tensor* y, const Tensor& dy, const Tensor& gamma,
                         const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx,
                         Tensor& dgamma, Tensor& dbeta) {
    same(x, dy, "batch norm backward");
    same(x, dx, "batch norm backward");
    check_dtype(dbeta, dgamma.dtype(), "batch norm bias gradient");
    const bool wide = dgamma.dtype() == DType::kF32;
    float* scratch = wide ? nullptr : bn_scratch(d.c) + 4 * d.c;
    g.backward(
        cudnn_,
        {x.raw(), y ? y->raw() : nullptr, dy.raw(), gamma.raw(), save_mean.raw(), save_invstd.raw(),
         dx.raw(), wide ? dgamma.raw() : scratch, wide ? dbeta.raw() : scratch + d.c},
        workspace(bn_workspace_));
    if (!wide) {
      cast(bn_scratch_.slice_flat(4 * d.c, d.c), dgamma);
      cast(bn_scratch_.slice_flat(5 * d.c, d.c), dbeta);
    }
  }

  // Scratch for the batch-norm graphs: their own running statistics (4 * c floats, zeroed), then
  // a 16-bit run's dgamma and dbeta in f32 (2 * c).
  float* bn_scratch(int64_t c) {
    if (!bn_scratch_.defined() || bn_scratch_.numel() < 6 * c) {
      scratch_moved();
      bn_scratch_ = empty(Shape{6 * c}, DType::kF32, MemCategory::kWorkspace,
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
