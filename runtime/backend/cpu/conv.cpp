// The CPU convolution plan: per pass, oneDNN's primitive or im2col + sgemm, chosen as the run's
// --conv-algo says within its --workspace-limit. Operands may be stored in 16 bits: each pass
// computes on f32 views (f32_views.h).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <memory>

#include "runtime/backend/cpu/conv_im2col.h"
#include "runtime/backend/cpu/conv_onednn.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/f32_views.h"
#include "runtime/backend/cpu/parallel.h"
#include "runtime/core/error.h"

namespace dlb {
namespace {

enum class CpuConvAlgo { kIm2col, kOnednn };

std::string describe(const ConvDesc& d) {
  return fmt::format("conv {}x{}, {}->{} channels on {}x{}, stride {}", d.kernel_h, d.kernel_w,
                     d.in_channels, d.out_channels, d.height, d.width, d.stride_h);
}

class CpuConvPlan final : public ConvPlan {
 public:
  // Both algorithms as they fit the workspace limit (either may be absent); choose() picks.
  CpuConvPlan(const ConvDesc& d, std::optional<size_t> workspace_limit)
      : ConvPlan(d), im2col_(Im2colConv::fit(d, workspace_limit)) {
    try {
      onednn_ = std::make_unique<OnednnConv>(d);
    } catch (const Unsupported& e) {
      onednn_missing_ = e.what();
    }
    if (onednn_ && workspace_limit) {
      for (ConvPass p : kConvPasses) {
        if (onednn_->workspace_bytes(p) > *workspace_limit) onednn_fits_[index(p)] = false;
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
      a.algorithm = uses_onednn(p) ? onednn_->algorithm(p) : im2col_->algorithm();
      a.workspace_bytes = workspace_bytes(p);
      out.push_back(a);
    }
    return out;
  }

  bool has(ConvPass p, CpuConvAlgo a) const {
    return a == CpuConvAlgo::kIm2col ? im2col_.has_value() : onednn_ && onednn_fits_[index(p)];
  }
  void use(ConvPass p, CpuConvAlgo a) { chosen_[index(p)] = a; }
  bool uses_onednn(ConvPass p) const { return chosen_[index(p)] == CpuConvAlgo::kOnednn; }
  size_t workspace_bytes(ConvPass p) const {
    return uses_onednn(p) ? onednn_->workspace_bytes(p) : im2col_->workspace_bytes();
  }
  const OnednnConv* onednn() const { return onednn_.get(); }
  const Im2colConv& im2col() const { return *im2col_; }
  const std::string& onednn_missing() const { return onednn_missing_; }

 private:
  static int index(ConvPass p) { return static_cast<int>(p); }
  std::optional<Im2colConv> im2col_;
  std::unique_ptr<OnednnConv> onednn_;
  std::string onednn_missing_;  // why oneDNN has no primitive for this problem
  std::array<bool, 3> onednn_fits_{true, true, true};
  std::array<CpuConvAlgo, 3> chosen_{CpuConvAlgo::kIm2col, CpuConvAlgo::kIm2col,
                                     CpuConvAlgo::kIm2col};
};

const CpuConvPlan& cpu_plan(const ConvPlan& plan) {
  auto* p = dynamic_cast<const CpuConvPlan*>(&plan);
  if (!p) throw InvalidArgument("a convolution plan from another backend was given to cpu");
  return *p;
}

void check_conv_tensors(const ConvDesc& d, const Tensor& x, const Tensor& w, const Tensor& y) {
  check_f32(x, "conv input");
  check_f32(w, "conv weight");
  check_f32(y, "conv output");
  const Shape xs{d.batch, d.in_channels, d.height, d.width};
  const Shape ws{d.out_channels, d.in_channels / d.groups, d.kernel_h, d.kernel_w};
  const Shape ys{d.batch, d.out_channels, d.out_h(), d.out_w()};
  if (x.shape() != xs || w.shape() != ws || y.shape() != ys) {
    throw InvalidArgument(fmt::format("conv tensors {} {} {} do not match the plan's {} {} {}",
                                      x.shape().str(), w.shape().str(), y.shape().str(), xs.str(),
                                      ws.str(), ys.str()));
  }
}

// Why no algorithm can run pass `p` within the limit: each one's least need.
std::string nothing_fits(const CpuConvPlan& plan, ConvPass p, std::optional<size_t> limit) {
  const ConvDesc& d = plan.desc();
  std::string onednn = plan.onednn() ? fmt::format("onednn needs {}",
                                                   format_bytes(plan.onednn()->workspace_bytes(p)))
                                     : fmt::format("onednn has none ({})", plan.onednn_missing());
  return fmt::format(
      "{}: no convolution algorithm for its {} pass fits --workspace-limit={}: im2col needs at "
      "least {} (one image's columns), {}",
      describe(d), conv_pass_name(p), limit ? format_bytes(*limit) : "none",
      format_bytes(Im2colConv::min_workspace_bytes(d)), onednn);
}

// Autotuning: one timed run of pass `p` with algorithm `a` on zero-filled operands, after an
// untimed one. The operands are workspace, freed on return.
double time_pass(CpuBackend& b, CpuConvPlan& plan, ConvPass p, CpuConvAlgo a) {
  const ConvDesc& d = plan.desc();
  plan.use(p, a);
  b.reserve_workspace(plan.workspace_bytes(p));
  Tensor x = b.empty({d.batch, d.in_channels, d.height, d.width}, DType::kF32,
                     MemCategory::kWorkspace, "autotune operands");
  Tensor w = b.empty({d.out_channels, d.in_channels / d.groups, d.kernel_h, d.kernel_w},
                     DType::kF32, MemCategory::kWorkspace, "autotune operands");
  Tensor y = b.empty({d.batch, d.out_channels, d.out_h(), d.out_w()}, DType::kF32,
                     MemCategory::kWorkspace, "autotune operands");
  b.fill(x, 0.f);
  b.fill(w, 0.f);
  b.fill(y, 0.f);
  const auto once = [&] {
    if (p == ConvPass::kForward) b.conv_forward(plan, x, w, y);
    if (p == ConvPass::kBackwardData) b.conv_backward_data(plan, y, w, x);
    if (p == ConvPass::kBackwardFilter) b.conv_backward_filter(plan, x, y, w);
  };
  once();
  const auto t0 = std::chrono::steady_clock::now();
  once();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
  auto plan = std::make_unique<CpuConvPlan>(d, workspace_limit_);
  for (ConvPass p : kConvPasses) {
    const bool im2col = plan->has(p, CpuConvAlgo::kIm2col);
    const bool onednn = plan->has(p, CpuConvAlgo::kOnednn);
    if (!im2col && !onednn) throw InvalidArgument(nothing_fits(*plan, p, workspace_limit_));
    CpuConvAlgo pick = im2col ? CpuConvAlgo::kIm2col : CpuConvAlgo::kOnednn;
    switch (conv_algo_) {
      case ConvAlgoChoice::kIm2col:
        if (!im2col) throw InvalidArgument(nothing_fits(*plan, p, workspace_limit_));
        break;
      case ConvAlgoChoice::kOnednn:
        if (!plan->onednn()) {
          throw Unsupported(fmt::format("--conv-algo=onednn: {}", plan->onednn_missing()));
        }
        if (!onednn) throw InvalidArgument(nothing_fits(*plan, p, workspace_limit_));
        pick = CpuConvAlgo::kOnednn;
        break;
      case ConvAlgoChoice::kHeuristic:
        // oneDNN's optimized primitives beat im2col; its reference loops do not.
        if (onednn && !(im2col && plan->onednn()->is_reference(p))) pick = CpuConvAlgo::kOnednn;
        break;
      case ConvAlgoChoice::kAutotune:
        if (im2col && onednn) {
          const double t_onednn = time_pass(*this, *plan, p, CpuConvAlgo::kOnednn);
          const double t_im2col = time_pass(*this, *plan, p, CpuConvAlgo::kIm2col);
          pick = t_onednn <= t_im2col ? CpuConvAlgo::kOnednn : CpuConvAlgo::kIm2col;
        }
        break;
    }
    plan->use(p, pick);
  }
  reserve_workspace(plan->workspace_bytes());
  return plan;
}

void CpuBackend::conv_forward(const ConvPlan& plan_, const Tensor& x_s, const Tensor& w_s,
                              Tensor& y_s) {
  F32Views f32(*this);
  const Tensor& x = f32.in(x_s);
  const Tensor& w = f32.in(w_s);
  Tensor& y = f32.out(y_s);
  const auto& plan = cpu_plan(plan_);
  check_conv_tensors(plan.desc(), x, w, y);
  void* ws = workspace(plan.workspace_bytes(ConvPass::kForward));
  if (plan.uses_onednn(ConvPass::kForward)) {
    plan.onednn()->forward(x.data<float>(), w.data<float>(), y.data<float>(), ws);
  } else {
    plan.im2col().forward(x.data<float>(), w.data<float>(), y.data<float>(),
                          static_cast<float*>(ws));
  }
}

void CpuBackend::conv_bias_forward(const ConvPlan& plan, const Tensor& x_s, const Tensor& w_s,
                                   const Tensor& b_s, Tensor& y_s) {
  F32Views f32(*this);
  Tensor& y = f32.out(y_s);
  conv_forward(plan, f32.in(x_s), f32.in(w_s), y);
  bias_add(f32.in(b_s), y);
}

void CpuBackend::conv_backward_data(const ConvPlan& plan_, const Tensor& dy_s, const Tensor& w_s,
                                    Tensor& dx_s) {
  F32Views f32(*this);
  const Tensor& dy = f32.in(dy_s);
  const Tensor& w = f32.in(w_s);
  Tensor& dx = f32.out(dx_s);
  const auto& plan = cpu_plan(plan_);
  check_conv_tensors(plan.desc(), dx, w, dy);
  void* ws = workspace(plan.workspace_bytes(ConvPass::kBackwardData));
  if (plan.uses_onednn(ConvPass::kBackwardData)) {
    plan.onednn()->backward_data(dy.data<float>(), w.data<float>(), dx.data<float>(), ws);
  } else {
    plan.im2col().backward_data(dy.data<float>(), w.data<float>(), dx.data<float>(),
                                static_cast<float*>(ws));
  }
}

void CpuBackend::conv_backward_filter(const ConvPlan& plan_, const Tensor& x_s, const Tensor& dy_s,
                                      Tensor& dw_s) {
  F32Views f32(*this);
  const Tensor& x = f32.in(x_s);
  const Tensor& dy = f32.in(dy_s);
  Tensor& dw = f32.out(dw_s);
  const auto& plan = cpu_plan(plan_);
  check_conv_tensors(plan.desc(), x, dw, dy);
  void* ws = workspace(plan.workspace_bytes(ConvPass::kBackwardFilter));
  if (plan.uses_onednn(ConvPass::kBackwardFilter)) {
    plan.onednn()->backward_filter(x.data<float>(), dy.data<float>(), dw.data<float>(), ws);
  } else {
    plan.im2col().backward_filter(x.data<float>(), dy.data<float>(), dw.data<float>(),
                                  static_cast<float*>(ws));
  }
}

void CpuBackend::bias_add(const Tensor& b_s, Tensor& y_s) {
  F32Views f32(*this);
  const Tensor& b = f32.in(b_s);
  Tensor& y = f32.inout(y_s);
  check_f32(b, "bias");
  check_f32(y, "bias output");
  const int64_t n = y.dim(0), c = y.dim(1), inner = y.numel() / (n * c);
  if (b.numel() != c) {
    throw InvalidArgument(fmt::format("bias of {} for {} channels", b.numel(), c));
  }
  const float* bp = b.data<float>();
  float* yp = y.data<float>();
  parallel_for(n * c, 2, [=](int64_t r) {
    float* row = yp + r * inner;
    const float bias = bp[r % c];
    for (int64_t k = 0; k < inner; ++k) row[k] += bias;
  });
}

void CpuBackend::bias_backward(const Tensor& dy_s, Tensor& db_s) {
  F32Views f32(*this);
  const Tensor& dy = f32.in(dy_s);
  Tensor& db = f32.out(db_s);
  check_f32(dy, "bias gradient input");
  check_f32(db, "bias gradient");
  const int64_t n = dy.dim(0), c = dy.dim(1), inner = dy.numel() / (n * c);
  const float* g = dy.data<float>();
  float* out = db.data<float>();
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
