#include "runtime/backend/cpu/conv_onednn.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "runtime/core/error.h"

namespace dlb {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto kF32 = memory::data_type::f32;
constexpr size_t kAlign = 64;

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Engines are thread-safe; each plan keeps its own stream, used by one rank's thread.
const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

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

// One operand of a pass: where the caller's NCHW (or KCRS) buffer goes in the primitive, and the
// reorder between it and the primitive's layout when they differ.
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
  Operand operands[3];  // two inputs, then the output
  memory::desc scratchpad;
  size_t scratchpad_offset = 0, bytes = 0;

  Pass(dnnl::primitive p, const dnnl::primitive_desc& pd, std::initializer_list<Operand> ops)
      : primitive(std::move(p)), implementation(pd.impl_info_str()) {
    std::copy(ops.begin(), ops.end(), operands);
    const auto& engine = cpu_engine();
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

  void run(const void* a, const void* b, void* out, void* workspace) const {
    try {
      dnnl::stream stream(cpu_engine());
      execute(stream, a, b, out, workspace);
    } catch (const dnnl::error& e) {
      throw DeviceError(fmt::format("onednn {}: {}", implementation, e.what()));
    }
  }

 private:
  void execute(dnnl::stream& stream, const void* a, const void* b, void* out,
               void* workspace) const {
    auto* ws = static_cast<uint8_t*>(workspace);
    const auto& engine = cpu_engine();
    void* user[3] = {const_cast<void*>(a), const_cast<void*>(b), out};
    std::unordered_map<int, memory> args;
    memory outputs[2];  // the user's output and the primitive's copy, when reordered
    for (int i = 0; i < 3; ++i) {
      const Operand& o = operands[i];
      memory mine(o.plain, engine, user[i]);
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
  Tag w_tag;

  explicit Problem(const ConvDesc& d) {
    x = {d.batch, d.in_channels, d.height, d.width};
    y = {d.batch, d.out_channels, d.out_h(), d.out_w()};
    if (d.groups == 1) {
      w = {d.out_channels, d.in_channels, d.kernel_h, d.kernel_w};
      w_tag = Tag::oihw;
    } else {
      w = {d.groups, d.out_channels / d.groups, d.in_channels / d.groups, d.kernel_h, d.kernel_w};
      w_tag = Tag::goihw;
    }
    strides = {d.stride_h, d.stride_w};
    pad_l = {d.pad_h, d.pad_w};
    // PyTorch's padding is symmetric and the last partial window is dropped; oneDNN wants the
    // right padding that the output size implies, which is then at most pad (maybe negative).
    pad_r = {(d.out_h() - 1) * d.stride_h + d.kernel_h - d.height - d.pad_h,
             (d.out_w() - 1) * d.stride_w + d.kernel_w - d.width - d.pad_w};
  }
  memory::desc plain_x() const { return {x, kF32, Tag::nchw}; }
  memory::desc plain_w() const { return {w, kF32, w_tag}; }
  memory::desc plain_y() const { return {y, kF32, Tag::nchw}; }
  static memory::desc any(const memory::dims& dims) { return {dims, kF32, Tag::any}; }
};

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

}  // namespace

OnednnConv::OnednnConv(const ConvDesc& d) {
  const Problem p(d);
  const auto& engine = cpu_engine();
  const auto attr = user_scratchpad();
  const auto direct = dnnl::algorithm::convolution_direct;
  try {
    const dnnl::convolution_forward::primitive_desc fwd(
        {dnnl::prop_kind::forward_training, direct, Problem::any(p.x), Problem::any(p.w),
         Problem::any(p.y), p.strides, p.pad_l, p.pad_r},
        attr, engine);
    passes_[0] = std::make_unique<Pass>(
        dnnl::convolution_forward(fwd), fwd,
        std::initializer_list<Operand>{operand(DNNL_ARG_SRC, p.plain_x(), false),
                                       operand(DNNL_ARG_WEIGHTS, p.plain_w(), false),
                                       operand(DNNL_ARG_DST, p.plain_y(), true)});
    passes_[0]->layout = layout_name(fwd.src_desc());

    const dnnl::convolution_backward_data::primitive_desc bwd_data(
        {direct, Problem::any(p.x), Problem::any(p.w), Problem::any(p.y), p.strides, p.pad_l,
         p.pad_r},
        attr, engine, fwd);
    passes_[1] = std::make_unique<Pass>(
        dnnl::convolution_backward_data(bwd_data), bwd_data,
        std::initializer_list<Operand>{operand(DNNL_ARG_DIFF_DST, p.plain_y(), false),
                                       operand(DNNL_ARG_WEIGHTS, p.plain_w(), false),
                                       operand(DNNL_ARG_DIFF_SRC, p.plain_x(), true)});
    passes_[1]->layout = layout_name(bwd_data.diff_src_desc());

    const dnnl::convolution_backward_weights::primitive_desc bwd_filter(
        {direct, Problem::any(p.x), Problem::any(p.w), Problem::any(p.y), p.strides, p.pad_l,
         p.pad_r},
        attr, engine, fwd);
    passes_[2] = std::make_unique<Pass>(
        dnnl::convolution_backward_weights(bwd_filter), bwd_filter,
        std::initializer_list<Operand>{operand(DNNL_ARG_SRC, p.plain_x(), false),
                                       operand(DNNL_ARG_DIFF_DST, p.plain_y(), false),
                                       operand(DNNL_ARG_DIFF_WEIGHTS, p.plain_w(), true)});
    passes_[2]->layout = layout_name(bwd_filter.src_desc());
  } catch (const dnnl::error& e) {
    throw Unsupported(fmt::format(
        "onednn has no convolution for {}x{}, {}->{} channels on {}x{}, stride {}, pad {}: {}",
        d.kernel_h, d.kernel_w, d.in_channels, d.out_channels, d.height, d.width, d.stride_h,
        d.pad_h, e.what()));
  }
}

OnednnConv::~OnednnConv() = default;

size_t OnednnConv::workspace_bytes(ConvPass pass) const {
  return passes_[static_cast<int>(pass)]->bytes;
}

std::string OnednnConv::algorithm(ConvPass pass) const {
  const Pass& p = *passes_[static_cast<int>(pass)];
  return fmt::format("onednn {} ({})", p.implementation, p.layout);
}

bool OnednnConv::is_reference(ConvPass pass) const {
  return passes_[static_cast<int>(pass)]->implementation.rfind("ref", 0) == 0;
}

void OnednnConv::forward(const float* x, const float* w, float* y, void* workspace) const {
  passes_[0]->run(x, w, y, workspace);
}
void OnednnConv::backward_data(const float* dy, const float* w, float* dx, void* workspace) const {
  passes_[1]->run(dy, w, dx, workspace);
}
void OnednnConv::backward_filter(const float* x, const float* dy, float* dw,
                                 void* workspace) const {
  passes_[2]->run(x, dy, dw, workspace);
}

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
}

}  // namespace dlb
