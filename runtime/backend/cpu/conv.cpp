// The CPU convolution plan: per pass, one of oneDNN's primitives (direct, Winograd, or oneDNN's
// own choice), im2col + sgemm, or im2col + one oneDNN matrix product (a channels-last bf16
// layer's passes, an NCHW layer's backward-filter pass), chosen as the run's --conv-algo says
// within its --workspace-limit. Operands may be stored in 16 bits. A bf16 layer's oneDNN
// primitives and im2col+matmul take its bf16 tensors as they are, where the CPU multiplies bf16
// natively (AVX-512 BF16, or AMX); every other pass computes on f32 views of them (f32_views.h).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "runtime/backend/cpu/conv_im2col.h"
#include "runtime/backend/cpu/conv_matmul.h"
#include "runtime/backend/cpu/conv_onednn.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/f32_views.h"
#include "runtime/backend/cpu/onednn_engine.h"
#include "runtime/backend/cpu/parallel.h"
#include "runtime/core/error.h"
#include "runtime/core/layout_order.h"

namespace dlb {
namespace {

// kDirectWithoutAmx: oneDNN's direct primitive in bf16, each pass on the first implementation
// not named as AMX's (OnednnKernels::kWithoutAmx), where oneDNN would otherwise take AMX's.
// kDirectF32: oneDNN's direct primitive in f32 on f32 views of a bf16 layer's tensors (exact:
// every bf16 value is an f32 one). Both are built only for a native bf16 layer on a CPU with AMX,
// where the heuristic may run a backward-filter pass on them; each plan has all three passes,
// and autotune may time any.
// kMatmul: im2col + one oneDNN matrix product (conv_matmul.h), on a native bf16 layer's
// channels-last tensors, or for the backward-filter pass of an NCHW layer, bf16 or f32.
enum class CpuConvAlgo {
  kIm2col,
  kDirect,
  kWinograd,
  kAuto,
  kDirectWithoutAmx,
  kDirectF32,
  kMatmul
};
constexpr int kCpuConvAlgos = 7;

OnednnAlgorithm onednn_algorithm(CpuConvAlgo a) {
  if (a == CpuConvAlgo::kWinograd) return OnednnAlgorithm::kWinograd;
  if (a == CpuConvAlgo::kAuto) return OnednnAlgorithm::kAuto;
  return OnednnAlgorithm::kDirect;
}

// oneDNN's plan of algorithm `a`: on the layer's bf16 tensors where it multiplies them natively,
// else on f32 views of them. Throws Unsupported when it has neither.
std::unique_ptr<OnednnConv> make_onednn(const ConvDesc& d, CpuConvAlgo a) {
  if (a == CpuConvAlgo::kDirectWithoutAmx) {
    return std::make_unique<OnednnConv>(d, OnednnAlgorithm::kDirect, DType::kBF16,
                                        OnednnKernels::kWithoutAmx);
  }
  if (a == CpuConvAlgo::kDirectF32) {
    return std::make_unique<OnednnConv>(d, OnednnAlgorithm::kDirect, DType::kF32);
  }
  if (native_bf16(d.types)) {
    try {
      return std::make_unique<OnednnConv>(d, onednn_algorithm(a), DType::kBF16);
    } catch (const Unsupported&) {  // no bf16 Winograd, or only reference loops: f32 it is
    }
  }
  return std::make_unique<OnednnConv>(d, onednn_algorithm(a), DType::kF32);
}

// "direct", "winograd", "auto", "direct without AMX" or "direct in f32", for messages.
std::string onednn_choice_name(CpuConvAlgo a) {
  if (a == CpuConvAlgo::kDirectWithoutAmx) return "direct without AMX";
  if (a == CpuConvAlgo::kDirectF32) return "direct in f32";
  return std::string(onednn_algorithm_name(onednn_algorithm(a)));
}

class CpuConvPlan final : public ConvPlan {
 public:
  // im2col as it fits the workspace limit, and oneDNN's `algorithms` and im2col+matmul (any may
  // be absent); make_conv_plan picks per pass.
  CpuConvPlan(const ConvDesc& d, std::optional<size_t> workspace_limit,
              const std::vector<CpuConvAlgo>& algorithms)
      : ConvPlan(d), im2col_(Im2colConv::fit(d, workspace_limit)), limit_(workspace_limit) {
    for (CpuConvAlgo a : algorithms) {
      try {
        if (a == CpuConvAlgo::kMatmul) {
          matmul_ = std::make_unique<MatmulConv>(d);
        } else {
          onednn_[index(a)] = make_onednn(d, a);
        }
      } catch (const Unsupported& e) {
        missing_[index(a)] = e.what();
      }
    }
  }

  size_t workspace_bytes() const override {
    size_t most = 0;
    for (ConvPass p : kConvPasses) most = std::max(most, workspace_bytes(p));
    return most;
  }
  std::vector<PassAlgorithm> algorithms() const override {
    std::vector<PassAlgorithm> out;
    for (ConvPass p : kConvPasses) {
      PassAlgorithm a;
      a.pass = p;
      const OnednnConv* conv = runs_onednn(p);
      const MatmulConv* matmul = runs_matmul(p);
      a.algorithm = conv     ? conv->algorithm(p)
                    : matmul ? matmul->algorithm(p)
                             : im2col_->algorithm();
      a.arithmetic = conv ? conv->arithmetic(p) : ConvArithmetic::kProducts;
      if (conv && conv->operands() != DType::kF32) a.products = {conv->operands(), true};
      if (matmul && matmul->operands() != DType::kF32) a.products = {matmul->operands(), true};
      a.workspace_bytes = workspace_bytes(p);
      a.refused = refused_[index(p)];
      out.push_back(a);
    }
    return out;
  }

  // Whether algorithm `a` can run pass `p` within the workspace limit.
  bool has(ConvPass p, CpuConvAlgo a) const {
    if (a == CpuConvAlgo::kIm2col) return im2col_.has_value();
    if (a == CpuConvAlgo::kMatmul) {
      return matmul_ && matmul_->has(p) && matmul_->workspace_bytes(p) <= matmul_limit();
    }
    const OnednnConv* conv = onednn(a);
    return conv && conv->has(p) && (!limit_ || conv->workspace_bytes(p) <= *limit_);
  }
  // Why it cannot (has() is false).
  std::string why_not(ConvPass p, CpuConvAlgo a) const {
    const OnednnConv* conv = onednn(a);
    const bool matmul = a == CpuConvAlgo::kMatmul && matmul_;
    if (!conv && !matmul) return missing_[index(a)];
    if (conv && !conv->has(p)) return conv->missing(p);
    if (matmul && !matmul_->has(p)) return matmul_->missing(p);
    if (matmul && !limit_) {
      return fmt::format("its {} pass needs {} of workspace, over its cap of {}", conv_pass_name(p),
                         format_bytes(matmul_->workspace_bytes(p)), format_bytes(kMatmulCap));
    }
    return fmt::format(
        "its {} pass needs {} of workspace, over --workspace-limit={}", conv_pass_name(p),
        format_bytes(matmul ? matmul_->workspace_bytes(p) : conv->workspace_bytes(p)),
        format_bytes(limit_.value_or(0)));
  }
  void use(ConvPass p, CpuConvAlgo a) { chosen_[index(p)] = a; }
  void refuse(ConvPass p, std::string why) { refused_[index(p)] = std::move(why); }
  // The oneDNN plan that runs pass `p`; null when im2col or im2col+matmul does.
  const OnednnConv* runs_onednn(ConvPass p) const { return onednn(chosen_[index(p)]); }
  // im2col+matmul, where it runs pass `p`; else null.
  const MatmulConv* runs_matmul(ConvPass p) const {
    return chosen_[index(p)] == CpuConvAlgo::kMatmul ? matmul_.get() : nullptr;
  }
  size_t workspace_bytes(ConvPass p) const {
    const OnednnConv* conv = runs_onednn(p);
    const MatmulConv* matmul = runs_matmul(p);
    return conv     ? conv->workspace_bytes(p)
           : matmul ? matmul->workspace_bytes(p)
                    : im2col_->workspace_bytes();
  }
  const OnednnConv* onednn(CpuConvAlgo a) const { return onednn_[index(a)].get(); }
  const std::string& onednn_missing(CpuConvAlgo a) const { return missing_[index(a)]; }
  const Im2colConv& im2col() const { return *im2col_; }
  const MatmulConv* matmul() const { return matmul_.get(); }
  std::optional<size_t> limit() const { return limit_; }

 private:
  // im2col+matmul's columns and window terms grow with the batch's pixels: without a limit it
  // takes at most this, as im2col's columns do (autotune reserves what it times).
  static constexpr size_t kMatmulCap = size_t{64} << 20;
  size_t matmul_limit() const { return limit_.value_or(kMatmulCap); }
  static int index(ConvPass p) { return static_cast<int>(p); }
  static int index(CpuConvAlgo a) { return static_cast<int>(a); }
  std::optional<Im2colConv> im2col_;
  std::optional<size_t> limit_;
  // im2col's and im2col+matmul's slots stay empty
  std::array<std::unique_ptr<OnednnConv>, kCpuConvAlgos> onednn_;
  std::unique_ptr<MatmulConv> matmul_;
  std::array<std::string, kCpuConvAlgos> missing_;  // why an algorithm has no plan
  std::array<CpuConvAlgo, 3> chosen_{CpuConvAlgo::kIm2col, CpuConvAlgo::kIm2col,
                                     CpuConvAlgo::kIm2col};
  std::array<std::string, 3> refused_;
};

const CpuConvPlan& cpu_plan(const ConvPlan& plan) {
  auto* p = dynamic_cast<const CpuConvPlan*>(&plan);
  if (!p) throw InvalidArgument("a convolution plan from another backend was given to cpu");
  return *p;
}

// The tensors of a pass that computes on `operands`: f32 views, or the stored 16-bit tensors.
// x and y are stored as ConvDesc::layout says; the weight, or (`gradient`) its gradient, as
// weight_layout or grad_layout says (kNCHW: as x, KCRS or channels-last KRSC).
void check_conv_tensors(const ConvDesc& d, const Tensor& x, const Tensor& w, const Tensor& y,
                        DType operands = DType::kF32, bool gradient = false) {
  for (auto [t, what] : {std::pair{&x, "conv input"}, {&w, "conv weight"}, {&y, "conv output"}}) {
    const Layout stored = t != &w ? Layout::kNCHW : gradient ? d.grad_layout : d.weight_layout;
    const Layout layout = stored == Layout::kNCHW ? d.layout : stored;  // kNCHW: as activations
    if (operands == DType::kF32 && layout == Layout::kNCHW) {
      check_f32(*t, what);
    } else if (!t->defined() || t->dtype() != operands || t->layout() != layout) {
      throw InvalidArgument(fmt::format("{} is {} {}; this convolution's plan takes {} {}", what,
                                        dtype_name(t->dtype()), layout_name(t->layout()),
                                        dtype_name(operands), layout_name(layout)));
    }
  }
  const Shape xs{d.batch, d.in_channels, d.height, d.width};
  const Shape ws{d.out_channels, d.in_channels / d.groups, d.kernel_h, d.kernel_w};
  const Shape ys{d.batch, d.out_channels, d.out_h(), d.out_w()};
  if (x.shape() != xs || w.shape() != ws || y.shape() != ys) {
    throw InvalidArgument(fmt::format("conv tensors {} {} {} do not match the plan's {} {} {}",
                                      x.shape().str(), w.shape().str(), y.shape().str(), xs.str(),
                                      ws.str(), ys.str()));
  }
}

// A bias the plan's primitive adds: `operands` values, one per output channel.
void check_conv_bias(const ConvDesc& d, const Tensor& b, DType operands) {
  if (b.dtype() != operands || b.numel() != d.out_channels) {
    throw InvalidArgument(fmt::format("conv bias is {} {}; the plan takes {} of {}",
                                      dtype_name(b.dtype()), b.shape().str(), d.out_channels,
                                      dtype_name(operands)));
  }
}

// Why no algorithm can run pass `p` within the limit: each one's least need.
std::string nothing_fits(const CpuConvPlan& plan, ConvPass p) {
  const ConvDesc& d = plan.desc();
  const std::optional<size_t> limit = plan.limit();
  const OnednnConv* direct = plan.onednn(CpuConvAlgo::kDirect);
  std::string onednn =
      direct ? fmt::format("onednn needs {}", format_bytes(direct->workspace_bytes(p)))
             : fmt::format("onednn has none ({})", plan.onednn_missing(CpuConvAlgo::kDirect));
  for (CpuConvAlgo a : {CpuConvAlgo::kWinograd, CpuConvAlgo::kAuto, CpuConvAlgo::kDirectWithoutAmx,
                        CpuConvAlgo::kDirectF32}) {
    const OnednnConv* conv = plan.onednn(a);
    if (!conv || !conv->has(p)) continue;
    onednn += fmt::format(", its {} needs {}", onednn_choice_name(a),
                          format_bytes(conv->workspace_bytes(p)));
  }
  const MatmulConv* matmul = plan.matmul();
  const std::string matmul_need =
      matmul && matmul->has(p)
          ? fmt::format("; im2col+matmul needs {}", format_bytes(matmul->workspace_bytes(p)))
          : "";
  const std::string im2col =
      d.layout != Layout::kNCHW
          ? "im2col does not run on channels-last activations"
          : fmt::format("im2col needs at least {} (one image's columns{})",
                        format_bytes(Im2colConv::min_workspace_bytes(d)),
                        d.weight_layout == Layout::kNCHW && d.grad_layout == Layout::kNCHW
                            ? ""
                            : ", and a relay of 16 channels' blocked weights");
  return fmt::format(
      "{}: no convolution algorithm for its {} pass fits --workspace-limit={}: {}, {}{}",
      "conv " + conv_shape_text(d), conv_pass_name(p), limit ? format_bytes(*limit) : "none",
      im2col, onednn, matmul_need);
}

// Autotuning: one timed run of pass `p` with algorithm `a` on zero-filled operands, after an
// untimed one. The operands are workspace, freed on return.
double time_pass(CpuBackend& b, CpuConvPlan& plan, ConvPass p, CpuConvAlgo a) {
  const ConvDesc& d = plan.desc();
  plan.use(p, a);
  b.reserve_workspace(plan.workspace_bytes(p));
  const auto zeros = [&](Shape shape, DType type, Layout layout = Layout::kNCHW) {
    Tensor t =
        b.empty(std::move(shape), type, MemCategory::kWorkspace, "autotune operands", layout);
    b.fill(t, 0.f);
    return t;
  };
  // In the layer's own types and layouts, as the step will call it: a bf16 plan's forward adds
  // the bias.
  Tensor x = zeros({d.batch, d.in_channels, d.height, d.width}, d.types.data, d.layout);
  // The weights as the forward and backward-data passes read them, or the gradient as
  // backward-filter writes it (in the gradients' type: a 16-bit run's are its parameters'; kNCHW:
  // in the activations' order).
  const Layout stored = p == ConvPass::kBackwardFilter ? d.grad_layout : d.weight_layout;
  Tensor w = zeros({d.out_channels, d.in_channels / d.groups, d.kernel_h, d.kernel_w},
                   d.types.params, stored == Layout::kNCHW ? d.layout : stored);
  Tensor y = zeros({d.batch, d.out_channels, d.out_h(), d.out_w()}, d.types.data, d.layout);
  Tensor bias = d.bias ? zeros({d.out_channels}, d.types.params) : Tensor();
  const auto once = [&] {
    if (p == ConvPass::kForward && d.bias) b.conv_bias_forward(plan, x, w, bias, y);
    if (p == ConvPass::kForward && !d.bias) b.conv_forward(plan, x, w, y);
    if (p == ConvPass::kBackwardData) b.conv_backward_data(plan, y, w, x);
    if (p == ConvPass::kBackwardFilter) b.conv_backward_filter(plan, x, y, w);
  };
  once();
  const auto t0 = std::chrono::steady_clock::now();
  once();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Where the heuristic takes oneDNN's Winograd: 3x3 kernels at stride 1 whose output holds at
// least four of Winograd's 4x4 tiles per image (8x8 or more). Measured on this CPU by `dlbench
// bench conv` (docs/cpu.md), the three passes together: 2.1x and 1.9x oneDNN's direct
// convolution on resnet18's 16x16 and 8x8 layers at batch 16, 0.96x on its 4x4 ones (one tile
// per image) and 0.30x on its 2x2 ones (a quarter of a tile), where transforming the weights
// outweighs the few tiles.
bool winograd_pays(const ConvDesc& d) {
  return d.kernel_h == 3 && d.kernel_w == 3 && d.stride_h == 1 && d.stride_w == 1 &&
         d.groups == 1 && d.out_h() >= 8 && d.out_w() >= 8;
}

// Whether AMX's bf16 backward-filter kernels (oneDNN's first choice on a CPU with AMX) should run
// this layer's pass rather than f32's. The pass sums over the batch's output pixels,
// n = batch x out_h x out_w, and AMX's tiles won mostly over a long sum: measured per layer on
// resnet50 here (oneDNN's own times, batch 8 at 64 px and batch 4 at 224 px; docs/cpu.md), AMX's
// time over f32's was 0.35x to 0.85x on the 3x3 layers this rule gives it, 0.57x to 1.02x on the
// others it gives it but one. A compromise fitted to those runs: it gives AMX that one, the 7x7
// stem at n = 8,192 (1.45x, 0.26 ms), and f32 a 3x3 stride-2 layer at n = 196 (AMX 0.93x) and the
// 1x1 layers at n = 784 (0.87x to 0.96x); kernels of other sizes (alexnet's) are unmeasured.
bool amx_backward_filter_pays(const ConvDesc& d) {
  const int64_t n = d.batch * d.out_h() * d.out_w();
  const bool three = d.kernel_h == 3 && d.kernel_w == 3;
  return three ? n >= (d.stride_h == 1 && d.stride_w == 1 ? 128 : 784) : n >= 3136;
}

// Where the heuristic takes im2col+matmul for a native bf16 pass (channels last, on a CPU with
// AMX). oneDNN 2.6's direct AMX kernels tile rows of output pixels, and fill AMX's 16-row tiles
// poorly when the rows are short; one product over the batch's pixels fills them. Measured per
// layer here (each pass's fastest of 6 to 12 steps, `dlbench run --conv-algo=matmul` against the
// heuristic's choice; docs/cpu.md): on resnet18 and resnet50 at 64 px (batch 16 and 8) and
// resnet50 at 224 px (batch 4), matmul's time over the other's was
// - forward and backward data: 0.42x to 0.85x on 2x2 outputs (64 px's last stage), 1.02x to
//   2.2x on 4x4 to 7x7 3x3 and 1x1 layers, and 2x to 17x on larger ones, whose columns and
//   window terms (backward data) are large (the stem's 7x7 forward: 5.9x to 12x);
// - backward filter: 0.21x to 0.96x for 1x1 kernels to 16 pixels wide (1.0x to 1.24x at 28 and
//   56), 0.24x to 0.82x for 3x3 kernels to 8 pixels wide, 1.28x and 0.82x at 14, 1.6x to 4x at
//   16 and wider; the stem's 7x7 1.5x to 2.9x.
bool matmul_pays(const ConvDesc& d, ConvPass p) {
  const bool one = d.kernel_h == 1 && d.kernel_w == 1;
  const bool three = d.kernel_h == 3 && d.kernel_w == 3;
  if (p == ConvPass::kBackwardFilter) return (one && d.out_w() <= 16) || (three && d.out_w() <= 8);
  return (one || three) && d.out_h() <= 2 && d.out_w() <= 2;
}

// Where the heuristic takes im2col+matmul for an f32 layer's backward-filter pass (NCHW, on a CPU
// with AVX-512): 3x3 kernels with 512 output channels on 2x2 outputs, where oneDNN 2.6's direct
// f32 kernel tiles rows of two pixels. Measured per layer here (each pass's fastest of 8 to 15
// traced steps, against the build before it; docs/cpu.md), matmul's time over direct's:
// 0.61x to 0.79x on those layers of resnet18 (batch 16) and resnet50 (batch 8) at 64 px, but
// 1.17x to 1.32x on resnet18's 256-channel 2x2 layers at 32 px and batch 8, 1.4x to 2x on its
// 1x1 outputs there, 0.67x to 1.12x on 1x1 kernels on 2x2 outputs, 1.3x to 2.5x on 4x4 and 8x8
// outputs and 3x to 7x on 16x16 ones.
bool f32_matmul_pays(const ConvDesc& d) {
  return d.kernel_h == 3 && d.kernel_w == 3 && d.out_channels >= 512 && d.out_h() == 2 &&
         d.out_w() == 2;
}

// Where the heuristic takes im2col+matmul for a native bf16 layer's backward-filter pass on NCHW
// activations (a CPU with AVX-512 BF16 and no AMX; with AMX, bf16 runs are channels last): 1x1
// and 3x3 kernels on outputs of at most 4x4, where oneDNN 2.6's direct bf16 kernel tiles rows of
// two to four pixels. Measured per layer here (AMD EPYC, `dlbench check-ops --mode=perf
// --passes=backward_weights --conv-algos=onednn,matmul`, resnet18 and resnet50 at 64 px and
// batch 16 and 8, resnet18 at 32 px and batch 8; docs/cpu.md), matmul's time over direct's:
// 0.48x to 0.99x on those layers but three of 0.02 ms (1.03x to 1.08x) and one 1x1 layer at
// 1.04x; 0.79x to 1.36x on 8x8 outputs, 0.70x to 1.70x on 16x16 ones, and 2.6x to 2.9x on the
// 7x7 stem.
bool nchw_bf16_matmul_pays(const ConvDesc& d) {
  const bool one = d.kernel_h == 1 && d.kernel_w == 1;
  const bool three = d.kernel_h == 3 && d.kernel_w == 3;
  return (one || three) && d.out_h() <= 4 && d.out_w() <= 4;
}

// A native bf16 backward-filter pass on a CPU with AMX: AMX's where it pays (above), else f32 on
// f32 views of the bf16 tensors, Winograd's where it pays and direct otherwise (oneDNN 2.6's bf16
// kernels off AMX took 1.07x to 2.12x f32's on every resnet50 layer here); bf16 off AMX where
// f32's does not fit; none (the caller goes on) where nothing does. bf16 then trains faster than
// fp32 here: resnet18 and resnet50 at 64 px 1.11x, resnet50 at 224 px 1.41x (docs/cpu.md).
std::optional<CpuConvAlgo> amx_cpu_backward_filter(const CpuConvPlan& plan) {
  const ConvPass p = ConvPass::kBackwardFilter;
  const ConvDesc& d = plan.desc();
  const OnednnConv* first = plan.onednn(CpuConvAlgo::kDirect);
  const bool amx = first && first->algorithm(p).find("amx") != std::string::npos;
  if (amx && amx_backward_filter_pays(d) && plan.has(p, CpuConvAlgo::kDirect)) {
    return CpuConvAlgo::kDirect;
  }
  if (winograd_pays(d) && plan.has(p, CpuConvAlgo::kWinograd)) return CpuConvAlgo::kWinograd;
  for (CpuConvAlgo a : {CpuConvAlgo::kDirectF32, CpuConvAlgo::kDirectWithoutAmx}) {
    if (plan.has(p, a)) return a;
  }
  return std::nullopt;
}

// The heuristic: oneDNN's direct primitive where it multiplies bf16 natively (on an AVX-512 BF16
// CPU, a bf16 resnet18 step so is 1.7x one that takes f32 Winograd on its 3x3 stride-1 layers,
// docs/cpu.md), but on a CPU with AMX im2col+matmul where matmul_pays, and the backward-filter
// pass as amx_cpu_backward_filter says; without AMX, an NCHW layer's backward-filter pass by
// im2col+matmul where nchw_bf16_matmul_pays. Else, for an f32 layer's backward-filter pass on an
// AVX-512 CPU, im2col+matmul where f32_matmul_pays; else oneDNN's Winograd where it pays and fits,
// else its direct primitive, unless that is its reference loops, which im2col beats by far, or it
// does not fit; then bf16 off AMX, f32, or im2col+matmul, where a native pass's first choice does
// not fit; Winograd where nothing else fits. The caller has checked that one of them fits.
CpuConvAlgo heuristic(const CpuConvPlan& plan, ConvPass p) {
  const OnednnConv* native = plan.onednn(CpuConvAlgo::kDirect);
  if (native && native->operands() != DType::kF32) {
    if (cpu_has_amx() && matmul_pays(plan.desc(), p) && plan.has(p, CpuConvAlgo::kMatmul)) {
      return CpuConvAlgo::kMatmul;
    }
    if (p == ConvPass::kBackwardFilter && cpu_has_amx()) {
      if (const std::optional<CpuConvAlgo> a = amx_cpu_backward_filter(plan)) return *a;
    }
    if (p == ConvPass::kBackwardFilter && plan.desc().layout == Layout::kNCHW &&
        nchw_bf16_matmul_pays(plan.desc()) && plan.has(p, CpuConvAlgo::kMatmul)) {
      return CpuConvAlgo::kMatmul;
    }
    if (plan.has(p, CpuConvAlgo::kDirect)) return CpuConvAlgo::kDirect;
  }
  if (p == ConvPass::kBackwardFilter && plan.desc().types.data == DType::kF32 &&
      cpu_blocks_channels_by_16() && f32_matmul_pays(plan.desc()) &&
      plan.has(p, CpuConvAlgo::kMatmul)) {
    return CpuConvAlgo::kMatmul;
  }
  const bool winograd = plan.has(p, CpuConvAlgo::kWinograd);
  if (winograd && winograd_pays(plan.desc())) return CpuConvAlgo::kWinograd;
  const bool im2col = plan.has(p, CpuConvAlgo::kIm2col);
  const bool direct = plan.has(p, CpuConvAlgo::kDirect);
  if (direct && !(im2col && plan.onednn(CpuConvAlgo::kDirect)->is_reference(p))) {
    return CpuConvAlgo::kDirect;
  }
  if (im2col) return CpuConvAlgo::kIm2col;
  for (CpuConvAlgo a :
       {CpuConvAlgo::kDirectWithoutAmx, CpuConvAlgo::kDirectF32, CpuConvAlgo::kMatmul}) {
    if (plan.has(p, a)) return a;  // a pass whose first choices do not fit
  }
  return winograd ? CpuConvAlgo::kWinograd : CpuConvAlgo::kDirect;
}

// The algorithm an --conv-algo that names one asks for; the heuristic's for the other two.
CpuConvAlgo named(ConvAlgoChoice c) {
  switch (c) {
    case ConvAlgoChoice::kIm2col:
      return CpuConvAlgo::kIm2col;
    case ConvAlgoChoice::kWinograd:
      return CpuConvAlgo::kWinograd;
    case ConvAlgoChoice::kAuto:
      return CpuConvAlgo::kAuto;
    case ConvAlgoChoice::kMatmul:
      return CpuConvAlgo::kMatmul;
    default:
      return CpuConvAlgo::kDirect;
  }
}

// The algorithms besides im2col a plan for `c` builds: those of the heuristic (every choice but
// im2col and onednn falls back to it; those two get none of kDirectWithoutAmx, kDirectF32 and
// kMatmul, which they never run), and what `c` names or times besides (a named matmul is made
// where it cannot run too, to say why).
std::vector<CpuConvAlgo> candidates(ConvAlgoChoice c, const ConvDesc& d) {
  std::vector<CpuConvAlgo> out = {CpuConvAlgo::kDirect};
  if (c == ConvAlgoChoice::kWinograd || c == ConvAlgoChoice::kAutotune || winograd_pays(d)) {
    out.push_back(CpuConvAlgo::kWinograd);
  }
  if (c == ConvAlgoChoice::kAuto) out.push_back(CpuConvAlgo::kAuto);
  if (c != ConvAlgoChoice::kOnednn && c != ConvAlgoChoice::kIm2col && native_bf16(d.types) &&
      cpu_has_amx()) {
    out.push_back(CpuConvAlgo::kDirectWithoutAmx);
    out.push_back(CpuConvAlgo::kDirectF32);
  }
  const bool f32 =
      d.types.data == DType::kF32 && d.types.params == DType::kF32 && d.layout == Layout::kNCHW;
  const bool bf16 = native_bf16(d.types) && (d.layout == Layout::kNHWC || nchw_bf16_matmul_pays(d));
  const bool f32_candidate = f32 && f32_matmul_pays(d);
  if (c == ConvAlgoChoice::kMatmul ||
      (c != ConvAlgoChoice::kOnednn && c != ConvAlgoChoice::kIm2col && (bf16 || f32_candidate))) {
    out.push_back(CpuConvAlgo::kMatmul);
  }
  return out;
}

// Pass `p`'s algorithm under `choice`; throws when the algorithm it names cannot run at all.
CpuConvAlgo choose(CpuBackend& b, CpuConvPlan& plan, ConvPass p, ConvAlgoChoice choice) {
  const bool im2col = plan.has(p, CpuConvAlgo::kIm2col);
  const bool direct = plan.has(p, CpuConvAlgo::kDirect);
  const bool amx_alternative = plan.has(p, CpuConvAlgo::kDirectWithoutAmx) ||
                               plan.has(p, CpuConvAlgo::kDirectF32) ||
                               plan.has(p, CpuConvAlgo::kMatmul);
  const bool winograd = plan.has(p, CpuConvAlgo::kWinograd) || plan.has(p, CpuConvAlgo::kAuto);
  if (!im2col && !direct && !amx_alternative && !winograd)
    throw InvalidArgument(nothing_fits(plan, p));
  switch (choice) {
    case ConvAlgoChoice::kIm2col:
      if (!im2col) throw InvalidArgument(nothing_fits(plan, p));
      return CpuConvAlgo::kIm2col;
    case ConvAlgoChoice::kOnednn:
      if (!plan.onednn(CpuConvAlgo::kDirect)) {
        throw Unsupported(
            fmt::format("--conv-algo=onednn: {}", plan.onednn_missing(CpuConvAlgo::kDirect)));
      }
      if (!direct) throw InvalidArgument(nothing_fits(plan, p));
      return CpuConvAlgo::kDirect;
    case ConvAlgoChoice::kWinograd:
    case ConvAlgoChoice::kAuto:
    case ConvAlgoChoice::kMatmul:
      if (plan.has(p, named(choice))) return named(choice);
      plan.refuse(p, plan.why_not(p, named(choice)));
      return heuristic(plan, p);
    case ConvAlgoChoice::kHeuristic:
      return heuristic(plan, p);
    case ConvAlgoChoice::kAutotune:
      break;
    case ConvAlgoChoice::kClassFft:
    case ConvAlgoChoice::kClassWinograd:
    case ConvAlgoChoice::kClassTensorCore:
    case ConvAlgoChoice::kClassOther:  // refused when the backend was made
      throw Unsupported(
          fmt::format("--conv-algo={}: cuDNN's engine classes are the cuda "
                      "backend's",
                      conv_algo_choice_name(choice)));
  }
  CpuConvAlgo best = heuristic(plan, p);
  double best_s = time_pass(b, plan, p, best);
  for (CpuConvAlgo a :
       {CpuConvAlgo::kIm2col, CpuConvAlgo::kDirect, CpuConvAlgo::kWinograd,
        CpuConvAlgo::kDirectWithoutAmx, CpuConvAlgo::kDirectF32, CpuConvAlgo::kMatmul}) {
    if (a == best || !plan.has(p, a)) continue;
    if (const double t = time_pass(b, plan, p, a); t < best_s) best = a, best_s = t;
  }
  return best;
}

// The oneDNN plan that runs pass `p` on the stored 16-bit tensors; null when im2col+matmul runs it
// (on them too) or it computes on f32 views (im2col, or an f32 plan).
const OnednnConv* native_pass(const CpuConvPlan& plan, ConvPass p) {
  const OnednnConv* conv = plan.runs_onednn(p);
  return conv && conv->operands() != DType::kF32 ? conv : nullptr;
}

}  // namespace

std::unique_ptr<ConvPlan> CpuBackend::make_conv_plan(const ConvDesc& d) {
  require(Op::kConv, d.types);
  if (d.groups < 1 || d.in_channels % d.groups || d.out_channels % d.groups) {
    throw InvalidArgument(fmt::format("conv groups {} must divide {} input and {} output channels",
                                      d.groups, d.in_channels, d.out_channels));
  }
  if (d.out_h() < 1 || d.out_w() < 1) {
    throw InvalidArgument(fmt::format("conv {}x{} on a {}x{} input has no output", d.kernel_h,
                                      d.kernel_w, d.height, d.width));
  }
  if (d.layout != Layout::kNCHW && d.layout != Layout::kNHWC) {
    throw InvalidArgument(fmt::format(
        "conv activations stored {}: the cpu backend takes NCHW or NHWC", layout_name(d.layout)));
  }
  const Shape w{d.out_channels, d.in_channels / d.groups, d.kernel_h, d.kernel_w};
  for (const Layout layout : {d.weight_layout, d.grad_layout}) {
    if (layout == Layout::kNHWC || (layout != Layout::kNCHW && d.groups != 1) ||
        !layout_holds(layout, w)) {
      throw InvalidArgument(fmt::format("conv weights {} (groups {}) cannot be stored {} here",
                                        w.str(), d.groups, layout_name(layout)));
    }
  }
  auto plan = std::make_unique<CpuConvPlan>(d, workspace_limit_, candidates(conv_algo_, d));
  for (ConvPass p : kConvPasses) {
    plan->use(p, choose(*this, *plan, p, conv_algo_));
  }
  reserve_workspace(plan->workspace_bytes());
  return plan;
}

void CpuBackend::conv_forward(const ConvPlan& plan_, const Tensor& x_in, const Tensor& w_s,
                              Tensor& y_out) {
  const auto& plan = cpu_plan(plan_);
  LayoutViews in_plan(*this, plan.desc().layout);
  const Tensor& x_s = in_plan.in(x_in);
  Tensor& y_s = in_plan.out(y_out);
  void* ws = workspace(plan.workspace_bytes(ConvPass::kForward));
  if (const MatmulConv* matmul = plan.runs_matmul(ConvPass::kForward)) {
    check_conv_tensors(plan.desc(), x_s, w_s, y_s, DType::kBF16);
    return matmul->forward(x_s.raw(), w_s.raw(), nullptr, y_s.raw(), ws);
  }
  if (const OnednnConv* conv = native_pass(plan, ConvPass::kForward)) {
    check_conv_tensors(plan.desc(), x_s, w_s, y_s, conv->operands());
    return conv->forward(x_s.raw(), w_s.raw(), nullptr, y_s.raw(), ws);
  }
  F32Views f32(*this);
  const Tensor& x = f32.in(x_s);
  const Tensor& w = f32.in(w_s);
  Tensor& y = f32.out(y_s);
  check_conv_tensors(plan.desc(), x, w, y);
  if (const OnednnConv* conv = plan.runs_onednn(ConvPass::kForward)) {
    conv->forward(x.data<float>(), w.data<float>(), nullptr, y.data<float>(), ws);
  } else {
    plan.im2col().forward(x.data<float>(), w.data<float>(), y.data<float>(),
                          static_cast<float*>(ws));
  }
}

// A native bf16 plan adds the bias inside its primitive, before its one rounding; every other
// adds it to the f32 view of the output, rounded once on store.
void CpuBackend::conv_bias_forward(const ConvPlan& plan_, const Tensor& x_s, const Tensor& w_s,
                                   const Tensor& b_s, Tensor& y_s) {
  const auto& plan = cpu_plan(plan_);
  const MatmulConv* matmul = plan.runs_matmul(ConvPass::kForward);
  const OnednnConv* conv = native_pass(plan, ConvPass::kForward);
  if (matmul || conv) {
    const DType operands = matmul ? DType::kBF16 : conv->operands();
    LayoutViews in_plan(*this, plan.desc().layout);
    const Tensor& x_p = in_plan.in(x_s);
    Tensor& y_p = in_plan.out(y_s);
    check_conv_tensors(plan.desc(), x_p, w_s, y_p, operands);
    check_conv_bias(plan.desc(), b_s, operands);
    void* ws = workspace(plan.workspace_bytes(ConvPass::kForward));
    if (matmul) return matmul->forward(x_p.raw(), w_s.raw(), b_s.raw(), y_p.raw(), ws);
    return conv->forward(x_p.raw(), w_s.raw(), b_s.raw(), y_p.raw(), ws);
  }
  F32Views f32(*this);
  Tensor& y = f32.out(y_s);
  conv_forward(plan, f32.in(x_s), f32.in(w_s), y);
  bias_add(f32.in(b_s), y);
}

void CpuBackend::conv_backward_data(const ConvPlan& plan_, const Tensor& dy_in, const Tensor& w_s,
                                    Tensor& dx_out) {
  const auto& plan = cpu_plan(plan_);
  LayoutViews in_plan(*this, plan.desc().layout);
  const Tensor& dy_s = in_plan.in(dy_in);
  Tensor& dx_s = in_plan.out(dx_out);
  void* ws = workspace(plan.workspace_bytes(ConvPass::kBackwardData));
  if (const MatmulConv* matmul = plan.runs_matmul(ConvPass::kBackwardData)) {
    check_conv_tensors(plan.desc(), dx_s, w_s, dy_s, DType::kBF16);
    return matmul->backward_data(dy_s.raw(), w_s.raw(), dx_s.raw(), ws);
  }
  if (const OnednnConv* conv = native_pass(plan, ConvPass::kBackwardData)) {
    check_conv_tensors(plan.desc(), dx_s, w_s, dy_s, conv->operands());
    return conv->backward_data(dy_s.raw(), w_s.raw(), dx_s.raw(), ws);
  }
  F32Views f32(*this);
  const Tensor& dy = f32.in(dy_s);
  const Tensor& w = f32.in(w_s);
  Tensor& dx = f32.out(dx_s);
  check_conv_tensors(plan.desc(), dx, w, dy);
  if (const OnednnConv* conv = plan.runs_onednn(ConvPass::kBackwardData)) {
    conv->backward_data(dy.data<float>(), w.data<float>(), dx.data<float>(), ws);
  } else {
    plan.im2col().backward_data(dy.data<float>(), w.data<float>(), dx.data<float>(),
                                static_cast<float*>(ws));
  }
}

void CpuBackend::conv_backward_filter(const ConvPlan& plan_, const Tensor& x_in,
                                      const Tensor& dy_in, Tensor& dw_s) {
  const auto& plan = cpu_plan(plan_);
  LayoutViews in_plan(*this, plan.desc().layout);
  const Tensor& x_s = in_plan.in(x_in);
  const Tensor& dy_s = in_plan.in(dy_in);
  void* ws = workspace(plan.workspace_bytes(ConvPass::kBackwardFilter));
  if (const MatmulConv* matmul = plan.runs_matmul(ConvPass::kBackwardFilter)) {
    check_conv_tensors(plan.desc(), x_s, dw_s, dy_s, matmul->operands(), true);
    return matmul->backward_filter(x_s.raw(), dy_s.raw(), dw_s.raw(), ws);
  }
  if (const OnednnConv* conv = native_pass(plan, ConvPass::kBackwardFilter)) {
    check_conv_tensors(plan.desc(), x_s, dw_s, dy_s, conv->operands(), true);
    return conv->backward_filter(x_s.raw(), dy_s.raw(), dw_s.raw(), ws);
  }
  F32Views f32(*this);
  const Tensor& x = f32.in(x_s);
  const Tensor& dy = f32.in(dy_s);
  Tensor& dw = f32.out(dw_s);
  check_conv_tensors(plan.desc(), x, dw, dy, DType::kF32, true);
  if (const OnednnConv* conv = plan.runs_onednn(ConvPass::kBackwardFilter)) {
    conv->backward_filter(x.data<float>(), dy.data<float>(), dw.data<float>(), ws);
  } else {
    plan.im2col().backward_filter(x.data<float>(), dy.data<float>(), dw.data<float>(),
                                  static_cast<float*>(ws));
  }
}

// Channels last keeps each pixel's channels together: pixel p's channel ch at p * c + ch.
void CpuBackend::bias_add(const Tensor& b_s, Tensor& y_s) {
  F32Views f32(*this);
  const Tensor& b = f32.in(b_s);
  Tensor& y = f32.inout(y_s);
  check_f32(b, "bias");
  check_f32_data(y, "bias output");
  const int64_t n = y.dim(0), c = y.dim(1), inner = y.numel() / (n * c);
  if (b.numel() != c) {
    throw InvalidArgument(fmt::format("bias of {} for {} channels", b.numel(), c));
  }
  const float* bp = b.data<float>();
  float* yp = y.data<float>();
  if (y.layout() == Layout::kNHWC) {
    return parallel_for(n * inner, 2, [=](int64_t p) {
      float* row = yp + p * c;
      for (int64_t ch = 0; ch < c; ++ch) row[ch] += bp[ch];
    });
  }
  check_f32(y, "bias output");
  parallel_for(n * c, 2, [=](int64_t r) {
    float* row = yp + r * inner;
    const float bias = bp[r % c];
    for (int64_t k = 0; k < inner; ++k) row[k] += bias;
  });
}

// Each channel's sum in double, image by image and pixel by pixel in either layout: the same bits.
void CpuBackend::bias_backward(const Tensor& dy_s, Tensor& db_s) {
  F32Views f32(*this);
  const Tensor& dy = f32.in(dy_s);
  Tensor& db = f32.out(db_s);
  check_f32_data(dy, "bias gradient input");
  check_f32(db, "bias gradient");
  const int64_t n = dy.dim(0), c = dy.dim(1), inner = dy.numel() / (n * c);
  const float* g = dy.data<float>();
  float* out = db.data<float>();
  if (dy.layout() == Layout::kNHWC) {
    return parallel_blocks(c, 2, [=](int64_t c0, int64_t c1) {
      std::vector<double> s(static_cast<size_t>(c1 - c0), 0.0);
      for (int64_t p = 0; p < n * inner; ++p) {
        const float* row = g + p * c + c0;
        for (int64_t q = 0; q < c1 - c0; ++q) s[q] += row[q];
      }
      for (int64_t q = 0; q < c1 - c0; ++q) out[c0 + q] = static_cast<float>(s[q]);
    });
  }
  check_f32(dy, "bias gradient input");
  parallel_for(c, 2, [=](int64_t ch) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* row = g + (i * c + ch) * inner;
      for (int64_t k = 0; k < inner; ++k) s += row[k];
    }
    out[ch] = static_cast<float>(s);
  });
}

}  // namespace dlb
