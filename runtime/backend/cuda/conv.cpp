// Convolution by cuDNN graphs (cudnn_graphs.h), shared by layers of the same shape
// (conv_plan_key), and the bias, added and differentiated by bias_kernels.h's kernels.
#include <fmt/format.h>

#include <algorithm>

#include "runtime/backend/cuda/bias_kernels.h"
#include "runtime/backend/cuda/cuda_backend_impl.h"

namespace dlb::cuda {
namespace {

// Autotuning without --workspace-limit considers engines up to this much workspace (some FFT
// engines ask for gigabytes); the tuning workspace is freed once the engines are chosen.
constexpr size_t kAutotuneWorkspaceCap = size_t{1} << 30;

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
      out.back().products = {desc().types.data, false};  // cuDNN reads the stored type
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

// A problem a plan can be made for: groups that divide the channels, an output, and weights
// stored as the activations' layout says.
void check_conv_desc(const ConvDesc& d) {
  if (d.groups < 1 || d.in_channels % d.groups || d.out_channels % d.groups) {
    throw InvalidArgument(fmt::format("conv groups {} must divide {} input and {} output channels",
                                      d.groups, d.in_channels, d.out_channels));
  }
  if (d.out_h() < 1 || d.out_w() < 1) {
    throw InvalidArgument(fmt::format("conv {}x{} on a {}x{} input has no output", d.kernel_h,
                                      d.kernel_w, d.height, d.width));
  }
  for (const Layout layout : {d.weight_layout, d.grad_layout}) {
    if (layout != Layout::kNCHW) {
      throw Unsupported(
          fmt::format("cuda convolutions read weights as the activations' layout says, not {}",
                      layout_name(layout)));
    }
  }
}

}  // namespace

std::unique_ptr<ConvPlan> CudaBackend::make_conv_plan(const ConvDesc& d) {
  require(Op::kConv, d.types);
  check_conv_desc(d);
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

void CudaBackend::conv_forward(const ConvPlan& plan, const Tensor& x, const Tensor& w, Tensor& y) {
  if (cuda_plan(plan).graphs().bias_fused()) {
    throw InvalidArgument("cuda: a plan whose graph adds a bias runs through conv_bias_forward");
  }
  run_conv(plan, ConvPass::kForward, {x.raw(), w.raw(), y.raw()}, {&x, &w, &y});
}

void CudaBackend::conv_bias_forward(const ConvPlan& plan, const Tensor& x, const Tensor& w,
                                    const Tensor& b, Tensor& y) {
  check_dtype(b, plan.desc().types.params, "conv bias");
  check_numel(b, plan.desc().out_channels, "conv bias");
  if (cuda_plan(plan).graphs().bias_fused()) {
    run_conv(plan, ConvPass::kForward, {x.raw(), w.raw(), y.raw(), b.raw()}, {&x, &w, &y});
  } else {  // cuDNN had no engine for the fused graph
    run_conv(plan, ConvPass::kForward, {x.raw(), w.raw(), y.raw()}, {&x, &w, &y});
    bias_add(b, y);
  }
}

void CudaBackend::conv_backward_data(const ConvPlan& plan, const Tensor& dy, const Tensor& w,
                                     Tensor& dx) {
  run_conv(plan, ConvPass::kBackwardData, {dy.raw(), w.raw(), dx.raw()}, {&dx, &w, &dy});
}

void CudaBackend::conv_backward_filter(const ConvPlan& plan, const Tensor& x, const Tensor& dy,
                                       Tensor& dw) {
  run_conv(plan, ConvPass::kBackwardFilter, {x.raw(), dy.raw(), dw.raw()}, {&x, &dw, &dy});
}

void CudaBackend::bias_add(const Tensor& b, Tensor& y) {
  check_numel(b, y.dim(1), "bias");
  with_storage(y.dtype(), "bias output", [&](auto tag) {
    using T = decltype(tag);
    run(y.numel(), BiasAdd<T>{as<T>(b), channel_rows(y), as<T>(y)});
  });
}

void CudaBackend::bias_backward(const Tensor& dy, Tensor& db) {
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

void CudaBackend::run_conv(const ConvPlan& p, ConvPass pass, const PassOperands& op,
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

}  // namespace dlb::cuda
