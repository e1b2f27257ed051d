#include "runtime/backend/cpu/conv_matmul.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/backend/cpu/onednn_engine.h"
#include "runtime/backend/cpu/onednn_layouts.h"
#include "runtime/backend/cpu/parallel.h"
#include "runtime/core/error.h"
#include "runtime/core/half.h"

namespace dlb {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto kBf16 = memory::data_type::bf16;
constexpr auto kF32 = memory::data_type::f32;
constexpr size_t kAlign = 64;

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// One matrix product c = a b (+ bias), made once.
struct Product {
  memory::desc a, b, c, bias, scratchpad;
  dnnl::matmul primitive;
  std::string implementation;

  Product(memory::desc a_, memory::desc b_, memory::desc c_, memory::desc bias_ = {})
      : a(std::move(a_)), b(std::move(b_)), c(std::move(c_)), bias(std::move(bias_)) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::matmul::primitive_desc pd(
        bias.get_size() ? dnnl::matmul::desc(a, b, bias, c) : dnnl::matmul::desc(a, b, c), attr,
        onednn_cpu_engine());
    implementation = pd.impl_info_str();
    if (implementation.rfind("ref", 0) == 0) {
      throw Unsupported(
          fmt::format("onednn multiplies these matrices with its reference "
                      "loops ({})",
                      implementation));
    }
    scratchpad = pd.scratchpad_desc();
    primitive = dnnl::matmul(pd);
  }

  void run(dnnl::stream& stream, const void* a_, const void* b_, void* c_, const void* bias_,
           void* scratch) const {
    const auto& e = onednn_cpu_engine();
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(a, e, const_cast<void*>(a_))},
                                         {DNNL_ARG_WEIGHTS, memory(b, e, const_cast<void*>(b_))},
                                         {DNNL_ARG_DST, memory(c, e, c_)}};
    if (bias_) args.emplace(DNNL_ARG_BIAS, memory(bias, e, const_cast<void*>(bias_)));
    if (scratchpad.get_size()) args.emplace(DNNL_ARG_SCRATCHPAD, memory(scratchpad, e, scratch));
    primitive.execute(stream, args);
  }
};

// A reorder between two layouts of the weights; absent where they are the same.
std::optional<dnnl::reorder> weight_reorder(const memory::desc& from, const memory::desc& to) {
  if (from == to) return std::nullopt;
  const auto& e = onednn_cpu_engine();
  return dnnl::reorder(dnnl::reorder::primitive_desc(e, from, e, to));
}

// Row p of `cols` (p = (image, out_y, out_x)) holds channels-last x's window at that output
// pixel, (kernel row, kernel column, channel) in order; zeros where the window lies in the
// padding. T: bf16's bits, or f32 (zero is all-zero bits in both).
template <typename T>
void gather_columns(const ConvDesc& d, const T* x, T* cols) {
  const int64_t oh = d.out_h(), ow = d.out_w(), c = d.in_channels;
  const int64_t k = d.kernel_h * d.kernel_w * c;
  parallel_for(d.batch * oh, 2, [=](int64_t row) {
    const int64_t n = row / oh, oy = row % oh;
    for (int64_t ox = 0; ox < ow; ++ox) {
      T* out = cols + (row * ow + ox) * k;
      for (int64_t r = 0; r < d.kernel_h; ++r) {
        const int64_t iy = oy * d.stride_h - d.pad_h + r;
        for (int64_t s = 0; s < d.kernel_w; ++s, out += c) {
          const int64_t ix = ox * d.stride_w - d.pad_w + s;
          if (iy < 0 || iy >= d.height || ix < 0 || ix >= d.width) {
            std::memset(out, 0, c * sizeof(T));
          } else {
            std::memcpy(out, x + ((n * d.height + iy) * d.width + ix) * c, c * sizeof(T));
          }
        }
      }
    }
  });
}

// dx at each input pixel: the sum, in f32, of the window terms in `terms` (rows as in
// gather_columns) that fall on it, kernel row by kernel column, rounded once to bf16.
void scatter_columns(const ConvDesc& d, const float* terms, uint16_t* dx) {
  const int64_t oh = d.out_h(), ow = d.out_w(), c = d.in_channels;
  const int64_t k = d.kernel_h * d.kernel_w * c;
  parallel_for(d.batch * d.height, 2, [=](int64_t row) {
    const int64_t n = row / d.height, iy = row % d.height;
    thread_local std::vector<float> sum;  // one input pixel's, on this thread
    sum.resize(static_cast<size_t>(c));
    for (int64_t ix = 0; ix < d.width; ++ix) {
      std::fill(sum.begin(), sum.end(), 0.f);
      for (int64_t r = 0; r < d.kernel_h; ++r) {
        const int64_t ty = iy + d.pad_h - r;
        if (ty < 0 || ty % d.stride_h || ty / d.stride_h >= oh) continue;
        for (int64_t s = 0; s < d.kernel_w; ++s) {
          const int64_t tx = ix + d.pad_w - s;
          if (tx < 0 || tx % d.stride_w || tx / d.stride_w >= ow) continue;
          const int64_t p = (n * oh + ty / d.stride_h) * ow + tx / d.stride_w;
          const float* term = terms + p * k + (r * d.kernel_w + s) * c;
          for (int64_t ch = 0; ch < c; ++ch) sum[ch] += term[ch];
        }
      }
      uint16_t* out = dx + (row * d.width + ix) * c;
      for (int64_t ch = 0; ch < c; ++ch) out[ch] = float_to_bf16(sum[ch]);
    }
  });
}

// NCHW x as channels last: each image's [channels, pixels] transposed to [pixels, channels].
template <typename T>
void to_channels_last(const ConvDesc& d, const T* x, T* last) {
  const int64_t c = d.in_channels, plane = d.height * d.width;
  parallel_for(d.batch * d.height, 2, [=](int64_t row) {
    const int64_t n = row / d.height, p0 = row % d.height * d.width;
    for (int64_t p = p0; p < p0 + d.width; ++p) {
      T* out = last + (n * plane + p) * c;
      const T* in = x + n * c * plane + p;
      for (int64_t ch = 0; ch < c; ++ch) out[ch] = in[ch * plane];
    }
  });
}

// NCHW dy as [out_channels, pixels] rows: each channel's plane of each image, image by image.
template <typename T>
void gradient_rows_nchw(const ConvDesc& d, const T* dy, T* rows) {
  const int64_t oc = d.out_channels, plane = d.out_h() * d.out_w(), pixels = d.batch * plane;
  parallel_for(oc, 2, [=](int64_t o) {
    for (int64_t n = 0; n < d.batch; ++n) {
      std::memcpy(rows + o * pixels + n * plane, dy + (n * oc + o) * plane, plane * sizeof(T));
    }
  });
}

}  // namespace

struct MatmulConv::Impl {
  ConvDesc d;
  DType operands = DType::kBF16;
  bool nchw = false;          // NCHW activations: the backward-filter pass only
  int64_t pixels = 0, k = 0;  // output pixels of the batch; one window's length
  // 1x1 at stride 1 without padding: channels-last x (nchw: its channels-last copy) is the columns
  bool x_is_columns = false;
  memory::desc rows;  // the weights as KRSC rows, [out_channels, k]
  std::optional<dnnl::reorder> w_to_rows, rows_to_dw;
  std::optional<Product> forward, forward_bias, backward_data, backward_filter;

  explicit Impl(const ConvDesc& desc);
  void make_bf16_passes(const memory::dims& w);
  template <typename T>
  std::pair<const void*, const void*> filter_operands(const void* x, const void* dy,
                                                      uint8_t*& ws) const;
  size_t element() const { return operands == DType::kF32 ? sizeof(float) : sizeof(uint16_t); }
  size_t columns_bytes() const { return x_is_columns ? 0 : aligned(pixels * k * element()); }
  size_t rows_bytes(bool reordered) const {
    return reordered ? aligned(d.out_channels * k * element()) : 0;
  }
  size_t terms_bytes() const { return x_is_columns ? 0 : aligned(pixels * k * sizeof(float)); }
  // nchw: x as channels last, and dy as [out_channels, pixels] rows
  size_t channels_last_bytes() const {
    return nchw ? aligned(d.batch * d.height * d.width * d.in_channels * element()) : 0;
  }
  size_t gradient_rows_bytes() const {
    return nchw ? aligned(d.out_channels * pixels * element()) : 0;
  }
};

MatmulConv::Impl::Impl(const ConvDesc& desc) : d(desc) {
  const bool bf16 = d.types.data == DType::kBF16 && d.types.params == DType::kBF16;
  const bool f32 = d.types.data == DType::kF32 && d.types.params == DType::kF32;
  const bool last = d.layout == Layout::kNHWC;
  if (d.groups != 1 || !((bf16 && cpu_multiplies_bf16()) || (f32 && !last))) {
    throw Unsupported(
        "im2col+matmul takes ungrouped layers: bf16 ones, where the CPU multiplies bf16 natively "
        "(every pass of channels-last ones, the backward-filter pass of NCHW ones), and the "
        "backward-filter pass of f32 ones stored NCHW");
  }
  operands = bf16 ? DType::kBF16 : DType::kF32;
  nchw = !last;
  const memory::data_type type = bf16 ? kBf16 : kF32;
  pixels = d.batch * d.out_h() * d.out_w();
  k = d.kernel_h * d.kernel_w * d.in_channels;
  x_is_columns = d.kernel_h == 1 && d.kernel_w == 1 && d.stride_h == 1 && d.stride_w == 1 &&
                 d.pad_h == 0 && d.pad_w == 0;
  const int64_t oc = d.out_channels;
  const memory::dims w{oc, d.in_channels, d.kernel_h, d.kernel_w};
  rows = memory::desc(w, type, Tag::ohwi);
  rows_to_dw = weight_reorder(rows, {w, type, onednn_weight_tag(d.grad_layout, d.layout)});
  // dw = dy^T x columns (nchw: dy's rows x columns)
  backward_filter.emplace(onednn_matrix(oc, pixels, type, !nchw), onednn_matrix(pixels, k, type),
                          onednn_matrix(oc, k, type));
  if (!nchw) make_bf16_passes(w);
}

// y = columns x rows^T; dx's terms = dy x rows.
void MatmulConv::Impl::make_bf16_passes(const memory::dims& w) {
  const int64_t oc = d.out_channels;
  w_to_rows = weight_reorder({w, kBf16, onednn_weight_tag(d.weight_layout, d.layout)}, rows);
  forward.emplace(onednn_matrix(pixels, k, kBf16), onednn_matrix(k, oc, kBf16, true),
                  onednn_matrix(pixels, oc, kBf16));
  if (d.bias) {
    forward_bias.emplace(onednn_matrix(pixels, k, kBf16), onednn_matrix(k, oc, kBf16, true),
                         onednn_matrix(pixels, oc, kBf16), onednn_matrix(1, oc, kBf16));
  }
  backward_data.emplace(onednn_matrix(pixels, oc, kBf16), onednn_matrix(oc, k, kBf16),
                        onednn_matrix(pixels, k, x_is_columns ? kBf16 : kF32));
}

MatmulConv::MatmulConv(const ConvDesc& d) {
  try {
    impl_ = std::make_unique<Impl>(d);
  } catch (const dnnl::error& e) {
    throw Unsupported(
        fmt::format("onednn has no matrix product or weight reorder for "
                    "im2col+matmul here: {}",
                    e.what()));
  }
}
MatmulConv::~MatmulConv() = default;

bool MatmulConv::has(ConvPass p) const { return p == ConvPass::kBackwardFilter || !impl_->nchw; }
std::string MatmulConv::missing(ConvPass p) const {
  return has(p) ? std::string()
                : fmt::format(
                      "im2col+matmul runs no {} pass of a layer stored NCHW, only its "
                      "backward-filter pass",
                      conv_pass_name(p));
}
DType MatmulConv::operands() const { return impl_->operands; }

size_t MatmulConv::workspace_bytes(ConvPass p) const {
  const Impl& m = *impl_;
  if (!has(p)) return 0;
  switch (p) {
    case ConvPass::kForward:
      return m.columns_bytes() + m.rows_bytes(m.w_to_rows.has_value()) +
             std::max(m.forward->scratchpad.get_size(),
                      m.forward_bias ? m.forward_bias->scratchpad.get_size() : 0);
    case ConvPass::kBackwardData:
      return m.rows_bytes(m.w_to_rows.has_value()) + m.terms_bytes() +
             m.backward_data->scratchpad.get_size();
    case ConvPass::kBackwardFilter:
      return m.channels_last_bytes() + m.columns_bytes() + m.gradient_rows_bytes() +
             m.rows_bytes(m.rows_to_dw.has_value()) + m.backward_filter->scratchpad.get_size();
  }
  return 0;
}

std::string MatmulConv::algorithm(ConvPass p) const {
  const Impl& m = *impl_;
  if (!has(p)) return missing(p);
  // A layer with a bias runs its forward pass with it (conv_bias_forward).
  const Product& product = p == ConvPass::kForward ? *(m.forward_bias ? m.forward_bias : m.forward)
                           : p == ConvPass::kBackwardData ? *m.backward_data
                                                          : *m.backward_filter;
  return "im2col+matmul " + product.implementation;
}

namespace {

// The weights as KRSC rows: `w` itself, or its reorder into `workspace`.
const void* weight_rows(const std::optional<dnnl::reorder>& reorder, const memory::desc& from,
                        const memory::desc& rows, dnnl::stream& stream, const void* w,
                        void* workspace) {
  if (!reorder) return w;
  const auto& e = onednn_cpu_engine();
  memory src(from, e, const_cast<void*>(w)), dst(rows, e, workspace);
  reorder->execute(stream, src, dst);
  return workspace;
}

template <typename F>
void on_onednn(const char* pass, F&& f) {
  try {
    dnnl::stream stream(onednn_cpu_engine());
    f(stream);
    stream.wait();
  } catch (const dnnl::error& e) {
    throw DeviceError(fmt::format("onednn im2col+matmul {}: {}", pass, e.what()));
  }
}

// The weights, or their gradient, as stored in `layout`, in the rows' type.
memory::desc stored(const memory::desc& rows, const ConvDesc& d, Layout layout) {
  return {rows.dims(), static_cast<memory::data_type>(rows.data.data_type),
          onednn_weight_tag(layout, d.layout)};
}

}  // namespace

void MatmulConv::forward(const void* x, const void* w, const void* bias, void* y,
                         void* workspace) const {
  const Impl& m = *impl_;
  if (bias && !m.forward_bias) throw InvalidArgument("conv bias given to a layer without one");
  auto* ws = static_cast<uint8_t*>(workspace);
  const void* cols = x;
  if (!m.x_is_columns) {
    gather_columns(m.d, static_cast<const uint16_t*>(x), reinterpret_cast<uint16_t*>(ws));
    cols = ws;
  }
  uint8_t* rows_at = ws + m.columns_bytes();
  uint8_t* scratch = rows_at + m.rows_bytes(m.w_to_rows.has_value());
  on_onednn("forward", [&](dnnl::stream& stream) {
    const void* rows = weight_rows(m.w_to_rows, stored(m.rows, m.d, m.d.weight_layout), m.rows,
                                   stream, w, rows_at);
    const Product& product = bias ? *m.forward_bias : *m.forward;
    product.run(stream, cols, rows, y, bias, scratch);
  });
}

void MatmulConv::backward_data(const void* dy, const void* w, void* dx, void* workspace) const {
  const Impl& m = *impl_;
  auto* ws = static_cast<uint8_t*>(workspace);
  uint8_t* terms = ws + m.rows_bytes(m.w_to_rows.has_value());
  uint8_t* scratch = terms + m.terms_bytes();
  on_onednn("backward_data", [&](dnnl::stream& stream) {
    const void* rows =
        weight_rows(m.w_to_rows, stored(m.rows, m.d, m.d.weight_layout), m.rows, stream, w, ws);
    m.backward_data->run(stream, dy, rows, m.x_is_columns ? dx : terms, nullptr, scratch);
  });
  if (!m.x_is_columns) {
    scatter_columns(m.d, reinterpret_cast<const float*>(terms), static_cast<uint16_t*>(dx));
  }
}

// The backward-filter product's operands, gathered into `ws` where they are not x and dy as
// they are: (nchw) x as channels last, the columns, and (nchw) dy's rows. Returns the columns and
// dy's rows, and moves `ws` past what it used.
template <typename T>
std::pair<const void*, const void*> MatmulConv::Impl::filter_operands(const void* x, const void* dy,
                                                                      uint8_t*& ws) const {
  const Impl& m = *this;
  const T* last = static_cast<const T*>(x);
  if (m.nchw) {
    to_channels_last(m.d, last, reinterpret_cast<T*>(ws));
    last = reinterpret_cast<const T*>(ws);
    ws += m.channels_last_bytes();
  }
  const void* cols = last;
  if (!m.x_is_columns) {
    gather_columns(m.d, last, reinterpret_cast<T*>(ws));
    cols = ws;
    ws += m.columns_bytes();
  }
  if (m.nchw) {
    gradient_rows_nchw(m.d, static_cast<const T*>(dy), reinterpret_cast<T*>(ws));
    dy = ws;
    ws += m.gradient_rows_bytes();
  }
  return {cols, dy};
}

// Workspace: filter_operands', the gradient's rows where it is stored otherwise, and the
// product's scratchpad.
void MatmulConv::backward_filter(const void* x, const void* dy, void* dw, void* workspace) const {
  const Impl& m = *impl_;
  uint8_t* rows_at = static_cast<uint8_t*>(workspace);
  const std::pair<const void*, const void*> operands =
      m.operands == DType::kF32 ? m.filter_operands<float>(x, dy, rows_at)
                                : m.filter_operands<uint16_t>(x, dy, rows_at);
  const void* cols = operands.first;  // no structured binding: C++17 lambdas cannot capture one
  const void* dy_rows = operands.second;
  uint8_t* rows = m.rows_to_dw ? rows_at : static_cast<uint8_t*>(dw);
  uint8_t* scratch = rows_at + m.rows_bytes(m.rows_to_dw.has_value());
  on_onednn("backward_filter", [&](dnnl::stream& stream) {
    m.backward_filter->run(stream, dy_rows, cols, rows, nullptr, scratch);
    if (m.rows_to_dw) {
      const auto& e = onednn_cpu_engine();
      memory src(m.rows, e, rows), dst(stored(m.rows, m.d, m.d.grad_layout), e, dw);
      m.rows_to_dw->execute(stream, src, dst);
    }
  });
}

}  // namespace dlb
