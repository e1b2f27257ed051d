#include "runtime/backend/cpu/conv_onednn.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/backend/cpu/onednn_engine.h"
#include "runtime/backend/cpu/onednn_layouts.h"
#include "runtime/core/error.h"

namespace dlb {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto kF32 = memory::data_type::f32;
constexpr size_t kAlign = 64;

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// "aBcd8b": the layout in oneDNN's notation. Dimensions run from the outermost stride in, as
// letters (a: batch or output channels, b: channels); an upper-case one is also blocked, and the
// blocks follow ("8b": 8 channels innermost).
std::string layout_name(const memory::desc& md) {
  if (md.data.format_kind != dnnl_blocked) return "opaque";
  const auto& blocking = md.data.format_desc.blocking;
  const int rank = md.data.ndims;
  std::vector<int> order(rank);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return blocking.strides[a] > blocking.strides[b]; });
  std::string name;
  for (int dim : order) {
    const bool blocked = std::find(blocking.inner_idxs, blocking.inner_idxs + blocking.inner_nblks,
                                   dim) != blocking.inner_idxs + blocking.inner_nblks;
    name += static_cast<char>((blocked ? 'A' : 'a') + dim);
  }
  for (int i = 0; i < blocking.inner_nblks; ++i) {
    name += fmt::format("{}{}", blocking.inner_blks[i],
                        static_cast<char>('a' + blocking.inner_idxs[i]));
  }
  return name;
}

// One operand of a pass: where the caller's buffer (NCHW or NHWC; KCRS, KRSC or blocked weights)
// goes in the primitive, and the reorder between it and the primitive's layout when they differ.
struct Operand {
  int arg = 0;
  memory::desc plain, inner;
  bool output = false;
  bool reordered = false;
  size_t offset = 0;  // of the inner copy in the workspace
  dnnl::reorder reorder;
};

Operand operand(int arg, const memory::desc& plain, bool output) {
  Operand o;
  o.arg = arg;
  o.plain = plain;
  o.output = output;
  return o;
}

}  // namespace

struct OnednnConv::Pass {
  dnnl::primitive primitive;
  std::string implementation, layout;
  std::vector<Operand> operands;  // two inputs, the output, and the forward pass's bias if any
  memory::desc scratchpad;
  size_t scratchpad_offset = 0, bytes = 0;

  Pass(dnnl::primitive p, const dnnl::primitive_desc& pd, std::vector<Operand> ops)
      : primitive(std::move(p)), implementation(pd.impl_info_str()), operands(std::move(ops)) {
    const auto& engine = onednn_cpu_engine();
    for (Operand& o : operands) {
      o.inner = pd.query_md(dnnl::query::exec_arg_md, o.arg);
      o.reordered = o.inner != o.plain;
      if (!o.reordered) continue;
      o.offset = bytes;
      bytes += aligned(o.inner.get_size());
      o.reorder =
          o.output ? dnnl::reorder(dnnl::reorder::primitive_desc(engine, o.inner, engine, o.plain))
                   : dnnl::reorder(dnnl::reorder::primitive_desc(engine, o.plain, engine, o.inner));
    }
    scratchpad = pd.scratchpad_desc();
    scratchpad_offset = bytes;
    bytes += aligned(scratchpad.get_size());
  }

  void run(const void* a, const void* b, void* out, void* workspace,
           const void* bias = nullptr) const {
    try {
      dnnl::stream stream(onednn_cpu_engine());
      execute(stream, {a, b, out, bias}, workspace);
    } catch (const dnnl::error& e) {
      throw DeviceError(fmt::format("onednn {}: {}", implementation, e.what()));
    }
  }

 private:
  void execute(dnnl::stream& stream, std::array<const void*, 4> user, void* workspace) const {
    auto* ws = static_cast<uint8_t*>(workspace);
    const auto& engine = onednn_cpu_engine();
    std::unordered_map<int, memory> args;
    memory outputs[2];  // the user's output and the primitive's copy, when reordered
    for (size_t i = 0; i < operands.size(); ++i) {
      const Operand& o = operands[i];
      memory mine(o.plain, engine, const_cast<void*>(user[i]));
      if (!o.reordered) {
        args.emplace(o.arg, mine);
        continue;
      }
      memory theirs(o.inner, engine, ws + o.offset);
      if (o.output) {
        outputs[0] = mine;
        outputs[1] = theirs;
      } else {
        o.reorder.execute(stream, mine, theirs);
      }
      args.emplace(o.arg, theirs);
    }
    if (scratchpad.get_size()) {
      args.emplace(DNNL_ARG_SCRATCHPAD, memory(scratchpad, engine, ws + scratchpad_offset));
    }
    primitive.execute(stream, args);
    if (operands[2].reordered) operands[2].reorder.execute(stream, outputs[1], outputs[0]);
    stream.wait();
  }
};

namespace {

// Everything one plan's three passes share.
struct Problem {
  memory::dims x, w, y, strides, pad_l, pad_r;
  Tag act_tag;        // x, y and their gradients: nchw, or nhwc (channels last)
  Tag w_tag, dw_tag;  // the weights as the forward and backward-data passes read them; dw
  memory::data_type type;
  bool bias;  // added by the forward primitive

  Problem(const ConvDesc& d, memory::data_type t)
      : act_tag(d.layout == Layout::kNHWC ? Tag::nhwc : Tag::nchw),
        type(t),
        bias(d.bias && t != kF32) {
    x = {d.batch, d.in_channels, d.height, d.width};
    y = {d.batch, d.out_channels, d.out_h(), d.out_w()};
    if (d.groups == 1) {
      w = {d.out_channels, d.in_channels, d.kernel_h, d.kernel_w};
      // The weights as stored: KCRS, or already in the blocks the direct primitive reads.
      w_tag = onednn_weight_tag(d.weight_layout, d.layout);
      dw_tag = onednn_weight_tag(d.grad_layout, d.layout);
    } else {
      w = {d.groups, d.out_channels / d.groups, d.in_channels / d.groups, d.kernel_h, d.kernel_w};
      w_tag = dw_tag = d.layout == Layout::kNHWC ? Tag::gohwi : Tag::goihw;  // KCRS or KRSC
    }
    strides = {d.stride_h, d.stride_w};
    pad_l = {d.pad_h, d.pad_w};
    // PyTorch's padding is symmetric and the last partial window is dropped; oneDNN wants the
    // right padding that the output size implies, which is then at most pad (maybe negative).
    pad_r = {(d.out_h() - 1) * d.stride_h + d.kernel_h - d.height - d.pad_h,
             (d.out_w() - 1) * d.stride_w + d.kernel_w - d.width - d.pad_w};
  }
  memory::desc plain_x() const { return {x, type, act_tag}; }
  memory::desc plain_w() const { return {w, type, w_tag}; }
  memory::desc plain_dw() const { return {w, type, dw_tag}; }
  memory::desc plain_y() const { return {y, type, act_tag}; }
  memory::desc plain_bias() const { return {{y[1]}, type, Tag::a}; }
  memory::desc any(const memory::dims& dims) const { return {dims, type, Tag::any}; }
};

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

dnnl::algorithm dnnl_algorithm(OnednnAlgorithm a) {
  switch (a) {
    case OnednnAlgorithm::kWinograd:
      return dnnl::algorithm::convolution_winograd;
    case OnednnAlgorithm::kAuto:
      return dnnl::algorithm::convolution_auto;
    case OnednnAlgorithm::kDirect:
      break;
  }
  return dnnl::algorithm::convolution_direct;
}

// oneDNN's Winograd for AVX-512 cores: F(4x4, 3x3), with the scaled transforms that
// runtime/check/reference_winograd.cpp writes out.
bool is_winograd_f4x3(const std::string& implementation) {
  return implementation.rfind("jit_wino_4x3:", 0) == 0;
}
// Any other Winograd implementation (oneDNN's for other instruction sets, with other transforms).
bool unchecked_winograd(const std::string& implementation) {
  return implementation.find("wino") != std::string::npos && !is_winograd_f4x3(implementation);
}

// `pd` moved on, for OnednnKernels::kWithoutAmx, past the implementations named as AMX's (oneDNN
// lists them first where the CPU has AMX); throws dnnl::error when nothing else is left.
template <class Desc>
Desc restricted(Desc pd, OnednnKernels kernels) {
  if (kernels == OnednnKernels::kFirst) return pd;
  while (std::string_view(pd.impl_info_str()).find("amx") != std::string_view::npos) {
    if (!pd.next_impl()) throw dnnl::error(dnnl_unimplemented, "every implementation uses AMX");
  }
  return pd;
}

using ForwardDesc = dnnl::convolution_forward::primitive_desc;

ForwardDesc forward_desc(const Problem& p, dnnl::algorithm algo, OnednnKernels kernels) {
  const auto kind = dnnl::prop_kind::forward_training;
  if (p.bias) {
    return restricted(ForwardDesc({kind, algo, p.any(p.x), p.any(p.w), p.plain_bias(), p.any(p.y),
                                   p.strides, p.pad_l, p.pad_r},
                                  user_scratchpad(), onednn_cpu_engine()),
                      kernels);
  }
  return restricted(
      ForwardDesc({kind, algo, p.any(p.x), p.any(p.w), p.any(p.y), p.strides, p.pad_l, p.pad_r},
                  user_scratchpad(), onednn_cpu_engine()),
      kernels);
}

memory::data_type onednn_type(DType t) {
  if (t == DType::kF32) return kF32;
  if (t == DType::kBF16) return memory::data_type::bf16;
  throw Unsupported(
      fmt::format("onednn convolutions here take f32 or bf16, not {}", dtype_name(t)));
}

}  // namespace

// The three passes' primitives, each made alone: a backward pass oneDNN lacks for this algorithm
// is left out, with oneDNN's words.
struct OnednnConv::Builder {
  const Problem p;
  const dnnl::algorithm algo;
  const OnednnKernels kernels;
  ForwardDesc fwd;

  std::unique_ptr<Pass> forward() const {
    std::vector<Operand> ops = {operand(DNNL_ARG_SRC, p.plain_x(), false),
                                operand(DNNL_ARG_WEIGHTS, p.plain_w(), false),
                                operand(DNNL_ARG_DST, p.plain_y(), true)};
    if (p.bias) ops.push_back(operand(DNNL_ARG_BIAS, p.plain_bias(), false));
    auto pass = std::make_unique<Pass>(dnnl::convolution_forward(fwd), fwd, std::move(ops));
    pass->layout = layout_name(fwd.src_desc());
    return pass;
  }
  std::unique_ptr<Pass> backward_data() const {
    const auto pd =
        restricted(dnnl::convolution_backward_data::primitive_desc(
                       {algo, p.any(p.x), p.any(p.w), p.any(p.y), p.strides, p.pad_l, p.pad_r},
                       user_scratchpad(), onednn_cpu_engine(), fwd),
                   kernels);
    auto pass = std::make_unique<Pass>(
        dnnl::convolution_backward_data(pd), pd,
        std::initializer_list<Operand>{operand(DNNL_ARG_DIFF_DST, p.plain_y(), false),
                                       operand(DNNL_ARG_WEIGHTS, p.plain_w(), false),
                                       operand(DNNL_ARG_DIFF_SRC, p.plain_x(), true)});
    pass->layout = layout_name(pd.diff_src_desc());
    return pass;
  }
  std::unique_ptr<Pass> backward_filter() const {
    const auto pd =
        restricted(dnnl::convolution_backward_weights::primitive_desc(
                       {algo, p.any(p.x), p.any(p.w), p.any(p.y), p.strides, p.pad_l, p.pad_r},
                       user_scratchpad(), onednn_cpu_engine(), fwd),
                   kernels);
    auto pass = std::make_unique<Pass>(
        dnnl::convolution_backward_weights(pd), pd,
        std::initializer_list<Operand>{operand(DNNL_ARG_SRC, p.plain_x(), false),
                                       operand(DNNL_ARG_DIFF_DST, p.plain_y(), false),
                                       operand(DNNL_ARG_DIFF_WEIGHTS, p.plain_dw(), true)});
    pass->layout = layout_name(pd.src_desc());
    return pass;
  }
};

OnednnConv::OnednnConv(const ConvDesc& d, OnednnAlgorithm algorithm, DType operands,
                       OnednnKernels kernels)
    : operands_(operands) {
  const Problem p(d, onednn_type(operands));
  adds_bias_ = p.bias;
  const dnnl::algorithm algo = dnnl_algorithm(algorithm);
  const std::string_view name = onednn_algorithm_name(algorithm);
  std::optional<Builder> b;
  try {
    b.emplace(Builder{p, algo, kernels, forward_desc(p, algo, kernels)});
  } catch (const dnnl::error& e) {
    throw Unsupported(
        fmt::format("onednn has no {} convolution for {}: {}", name, conv_shape_text(d), e.what()));
  }
  const auto make = [&](ConvPass pass, auto build) {
    const int i = static_cast<int>(pass);
    try {
      passes_[i] = build();
    } catch (const dnnl::error& e) {
      missing_[i] = fmt::format("onednn has no {} {} pass for {}: {}", name, conv_pass_name(pass),
                                conv_shape_text(d), e.what());
      return;
    }
    if (const std::string impl = passes_[i]->implementation; unchecked_winograd(impl)) {
      passes_[i].reset();
      missing_[i] = fmt::format(
          "onednn's {} {} pass for {} is {}, whose transforms are not the "
          "F(4x4, 3x3) ones the op checker bounds",
          name, conv_pass_name(pass), conv_shape_text(d), impl);
    }
  };
  make(ConvPass::kForward, [&] { return b->forward(); });
  if (!has(ConvPass::kForward)) throw Unsupported(missing(ConvPass::kForward));
  make(ConvPass::kBackwardData, [&] { return b->backward_data(); });
  make(ConvPass::kBackwardFilter, [&] { return b->backward_filter(); });
  if (algorithm == OnednnAlgorithm::kDirect) {
    for (ConvPass pass : kConvPasses) {
      if (!has(pass)) throw Unsupported(missing(pass));
    }
  }
  if (operands != DType::kF32) refuse_reference_loops(d, name);
  if (adds_bias_) without_bias_ = forward_without_bias(d, algorithm, kernels);
}

// The forward pass of a bias plan without its bias, for callers that add it apart (the Backend's
// composed conv_bias_forward, which a delegating backend runs): the result is rounded once more.
std::unique_ptr<OnednnConv::Pass> OnednnConv::forward_without_bias(const ConvDesc& d,
                                                                   OnednnAlgorithm algorithm,
                                                                   OnednnKernels kernels) const {
  ConvDesc plain = d;
  plain.bias = false;
  const Problem p(plain, onednn_type(operands_));
  const dnnl::algorithm algo = dnnl_algorithm(algorithm);
  try {
    return Builder{p, algo, kernels, forward_desc(p, algo, kernels)}.forward();
  } catch (const dnnl::error& e) {
    throw Unsupported(
        fmt::format("onednn has a {} convolution with a bias for {}, but not "
                    "without: {}",
                    dtype_name(operands_), conv_shape_text(d), e.what()));
  }
}

// A 16-bit plan is worth its rounding only when oneDNN multiplies in 16 bits: its reference
// loops are slower than the f32 plan by far.
void OnednnConv::refuse_reference_loops(const ConvDesc& d, std::string_view name) const {
  for (ConvPass pass : kConvPasses) {
    if (!has(pass) || !is_reference(pass)) continue;
    throw Unsupported(
        fmt::format("onednn has only its reference loops ({}) for a {} {} {} pass "
                    "for {}",
                    passes_[static_cast<int>(pass)]->implementation, dtype_name(operands_), name,
                    conv_pass_name(pass), conv_shape_text(d)));
  }
}

OnednnConv::~OnednnConv() = default;

size_t OnednnConv::workspace_bytes(ConvPass pass) const {
  const size_t bytes = passes_[static_cast<int>(pass)]->bytes;
  return pass == ConvPass::kForward && without_bias_ ? std::max(bytes, without_bias_->bytes)
                                                     : bytes;
}

std::string OnednnConv::algorithm(ConvPass pass) const {
  const Pass& p = *passes_[static_cast<int>(pass)];
  return fmt::format("onednn {} ({})", p.implementation, p.layout);
}

ConvArithmetic OnednnConv::arithmetic(ConvPass pass) const {
  return has(pass) && is_winograd_f4x3(passes_[static_cast<int>(pass)]->implementation)
             ? ConvArithmetic::kWinogradF4x3
             : ConvArithmetic::kProducts;
}

bool OnednnConv::is_reference(ConvPass pass) const {
  return passes_[static_cast<int>(pass)]->implementation.rfind("ref", 0) == 0;
}

void OnednnConv::forward(const void* x, const void* w, const void* bias, void* y,
                         void* workspace) const {
  if (bias && !adds_bias_) throw InvalidArgument("this convolution's plan has no bias to add");
  if (!bias && adds_bias_) return without_bias_->run(x, w, y, workspace);
  passes_[0]->run(x, w, y, workspace, bias);
}
void OnednnConv::backward_data(const void* dy, const void* w, void* dx, void* workspace) const {
  passes_[1]->run(dy, w, dx, workspace);
}
void OnednnConv::backward_filter(const void* x, const void* dy, void* dw, void* workspace) const {
  passes_[2]->run(x, dy, dw, workspace);
}

std::string_view onednn_algorithm_name(OnednnAlgorithm a) {
  switch (a) {
    case OnednnAlgorithm::kDirect:
      return "direct";
    case OnednnAlgorithm::kWinograd:
      return "winograd";
    case OnednnAlgorithm::kAuto:
      return "auto";
  }
  return "?";
}

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
}

dnnl::memory::format_tag onednn_weight_tag(Layout layout, Layout activations) {
  switch (layout) {
    case Layout::kOIhw16i16o:
      return Tag::OIhw16i16o;
    case Layout::kOIhw8i16o2i:
      return Tag::OIhw8i16o2i;
    case Layout::kNCHW:
    case Layout::kNHWC:
      break;
  }
  return activations == Layout::kNHWC ? Tag::ohwi : Tag::oihw;
}

}  // namespace dlb
