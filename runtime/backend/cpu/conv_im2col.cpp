#include "runtime/backend/cpu/conv_im2col.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "runtime/core/layout_order.h"

namespace dlb {
namespace {

constexpr size_t kMaxWorkspaceFloats = size_t{16} << 20;  // 64 MiB of columns per chunk

// Floats of one image's columns and GEMM output: [cin_g * kh * kw + cout_g, out pixels].
size_t floats_per_image(const ConvDesc& d) {
  const int64_t k = d.in_channels / d.groups * d.kernel_h * d.kernel_w;
  return static_cast<size_t>((k + d.out_channels / d.groups) * d.out_h() * d.out_w());
}

constexpr int64_t kBlock = kWeightBlock;  // the blocked layouts', of output and input channels

// Floats of the relay that the GEMMs read blocked weights, and write a blocked gradient, through
// (ConvDesc::weight_layout, grad_layout): 16 output channels' KCRS rows, or 16 input channels'
// columns of every output channel, at a time; none for KCRS weights and gradient.
size_t relay_floats(const ConvDesc& d) {
  if (d.weight_layout == Layout::kNCHW && d.grad_layout == Layout::kNCHW) return 0;
  return static_cast<size_t>(kBlock * d.kernel_h * d.kernel_w *
                             std::max(d.in_channels, d.out_channels));
}

// Where weights of shape `w` blocked in `layout` keep element (k, c, rs), rs = r * S + s
// (stored_offset).
struct Blocks {
  Layout layout;
  Shape w;
  int64_t in_blocks, taps;  // C / 16, R * S
  Blocks(const ConvDesc& d, Layout blocked)
      : layout(blocked),
        w{d.out_channels, d.in_channels, d.kernel_h, d.kernel_w},
        in_blocks(d.in_channels / kBlock),
        taps(d.kernel_h * d.kernel_w) {}
  int64_t at(int64_t k, int64_t c, int64_t rs) const {
    return stored_offset(layout, w, k, c, rs / w[3], rs % w[3]);
  }
};

// Output channels [16 kb, 16 kb + 16) as KCRS rows [16, C * R * S], and back.
void rows_of(const Blocks& b, const float* w, int64_t kb, float* rows) {
  const int64_t k_len = b.in_blocks * kBlock * b.taps;
  for (int64_t i = 0; i < kBlock; ++i)
    for (int64_t c = 0; c < b.in_blocks * kBlock; ++c)
      for (int64_t rs = 0; rs < b.taps; ++rs)
        rows[i * k_len + c * b.taps + rs] = w[b.at(kb * kBlock + i, c, rs)];
}
void rows_into(const Blocks& b, const float* rows, int64_t kb, float* w) {
  const int64_t k_len = b.in_blocks * kBlock * b.taps;
  for (int64_t i = 0; i < kBlock; ++i)
    for (int64_t c = 0; c < b.in_blocks * kBlock; ++c)
      for (int64_t rs = 0; rs < b.taps; ++rs)
        w[b.at(kb * kBlock + i, c, rs)] = rows[i * k_len + c * b.taps + rs];
}
// Input channels [16 cb, 16 cb + 16) of every output channel: [K, 16 * R * S], KCRS order.
void columns_of(const Blocks& b, const float* w, int64_t out_channels, int64_t cb, float* cols) {
  const int64_t width = kBlock * b.taps;
  for (int64_t k = 0; k < out_channels; ++k)
    for (int64_t c = 0; c < kBlock; ++c)
      for (int64_t rs = 0; rs < b.taps; ++rs)
        cols[k * width + c * b.taps + rs] = w[b.at(k, cb * kBlock + c, rs)];
}

// Columns of one image and one group: rows (c, ki, kj), columns the output pixels; written at
// column offset `col0` of a matrix `ld` wide.
void im2col(const ConvDesc& d, const float* x, float* cols, int64_t ld, int64_t col0) {
  const int64_t oh = d.out_h(), ow = d.out_w();
  const int64_t cin_g = d.in_channels / d.groups;
  for (int64_t c = 0; c < cin_g; ++c) {
    for (int64_t ki = 0; ki < d.kernel_h; ++ki) {
      for (int64_t kj = 0; kj < d.kernel_w; ++kj) {
        float* row = cols + ((c * d.kernel_h + ki) * d.kernel_w + kj) * ld + col0;
        const float* xc = x + c * d.height * d.width;
        for (int64_t i = 0; i < oh; ++i) {
          const int64_t ih = i * d.stride_h - d.pad_h + ki;
          float* out = row + i * ow;
          if (ih < 0 || ih >= d.height) {
            std::fill(out, out + ow, 0.f);
            continue;
          }
          const float* xrow = xc + ih * d.width;
          for (int64_t j = 0; j < ow; ++j) {
            const int64_t iw = j * d.stride_w - d.pad_w + kj;
            out[j] = (iw >= 0 && iw < d.width) ? xrow[iw] : 0.f;
          }
        }
      }
    }
  }
}

// The adjoint of im2col: adds columns back into dx (one image, one group).
void col2im(const ConvDesc& d, const float* cols, int64_t ld, int64_t col0, float* dx) {
  const int64_t oh = d.out_h(), ow = d.out_w();
  const int64_t cin_g = d.in_channels / d.groups;
  for (int64_t c = 0; c < cin_g; ++c) {
    for (int64_t ki = 0; ki < d.kernel_h; ++ki) {
      for (int64_t kj = 0; kj < d.kernel_w; ++kj) {
        const float* row = cols + ((c * d.kernel_h + ki) * d.kernel_w + kj) * ld + col0;
        float* xc = dx + c * d.height * d.width;
        for (int64_t i = 0; i < oh; ++i) {
          const int64_t ih = i * d.stride_h - d.pad_h + ki;
          if (ih < 0 || ih >= d.height) continue;
          const float* in = row + i * ow;
          float* xrow = xc + ih * d.width;
          for (int64_t j = 0; j < ow; ++j) {
            const int64_t iw = j * d.stride_w - d.pad_w + kj;
            if (iw >= 0 && iw < d.width) xrow[iw] += in[j];
          }
        }
      }
    }
  }
}

}  // namespace

std::optional<Im2colConv> Im2colConv::fit(const ConvDesc& d,
                                          std::optional<size_t> workspace_limit) {
  if (d.layout != Layout::kNCHW) return std::nullopt;  // its columns are NCHW's
  const size_t per_image = floats_per_image(d), weights = relay_floats(d);
  size_t max_floats = kMaxWorkspaceFloats;
  if (workspace_limit) {
    if ((per_image + weights) * sizeof(float) > *workspace_limit) return std::nullopt;
    max_floats = std::min(max_floats, *workspace_limit / sizeof(float) - weights);
  }
  return Im2colConv(d,
                    std::clamp<int64_t>(static_cast<int64_t>(max_floats / per_image), 1, d.batch));
}

size_t Im2colConv::min_workspace_bytes(const ConvDesc& d) {
  return (floats_per_image(d) + relay_floats(d)) * sizeof(float);
}

Im2colConv::Im2colConv(const ConvDesc& d, int64_t chunk)
    : d_(d),
      cin_g_(d.in_channels / d.groups),
      cout_g_(d.out_channels / d.groups),
      k_(cin_g_ * d.kernel_h * d.kernel_w),
      hw_out_(d.out_h() * d.out_w()),
      hw_in_(d.height * d.width),
      chunk_(chunk) {}

size_t Im2colConv::workspace_bytes() const {
  return (columns_floats() + relay_floats(d_)) * sizeof(float);
}

size_t Im2colConv::columns_floats() const {
  return static_cast<size_t>((k_ + cout_g_) * hw_out_ * chunk_);
}

// out [cout, ld] = W cols, for group `grp`. Blocked weights (one group) 16 output channels at a
// time: each output's sum over k is the one GEMM's, in the same order (OpenBLAS may still take
// another kernel for 16 rows, and round a long sum otherwise).
void Im2colConv::weights_times(const float* w, int64_t grp, const float* cols, int64_t ld,
                               float* out, float* relay) const {
  if (d_.weight_layout == Layout::kNCHW) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, cout_g_, ld, k_, 1.f,
                w + grp * cout_g_ * k_, k_, cols, ld, 0.f, out, ld);
    return;
  }
  const Blocks b(d_, d_.weight_layout);
  for (int64_t kb = 0; kb < cout_g_ / kBlock; ++kb) {
    rows_of(b, w, kb, relay);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kBlock, ld, k_, 1.f, relay, k_, cols, ld,
                0.f, out + kb * kBlock * ld, ld);
  }
}

// cols [k, ld] = W^T dy, for group `grp`; blocked weights 16 input channels' rows at a time.
void Im2colConv::weights_transposed_times(const float* w, int64_t grp, const float* dyc, int64_t ld,
                                          float* cols, float* relay) const {
  if (d_.weight_layout == Layout::kNCHW) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k_, ld, cout_g_, 1.f,
                w + grp * cout_g_ * k_, k_, dyc, ld, 0.f, cols, ld);
    return;
  }
  const Blocks b(d_, d_.weight_layout);
  const int64_t width = kBlock * b.taps;
  for (int64_t cb = 0; cb < b.in_blocks; ++cb) {
    columns_of(b, w, cout_g_, cb, relay);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, width, ld, cout_g_, 1.f, relay, width, dyc,
                ld, 0.f, cols + cb * width * ld, ld);
  }
}

// dW (+)= dy cols^T, for group `grp` (added to what dW holds when `accumulate`); blocked weights
// 16 output channels at a time, through KCRS rows.
void Im2colConv::gradient_times(const float* dyc, const float* cols, int64_t ld, bool accumulate,
                                int64_t grp, float* dw, float* relay) const {
  const float beta = accumulate ? 1.f : 0.f;
  if (d_.grad_layout == Layout::kNCHW) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, cout_g_, k_, ld, 1.f, dyc, ld, cols, ld,
                beta, dw + grp * cout_g_ * k_, k_);
    return;
  }
  const Blocks b(d_, d_.grad_layout);
  for (int64_t kb = 0; kb < cout_g_ / kBlock; ++kb) {
    if (accumulate) rows_of(b, dw, kb, relay);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kBlock, k_, ld, 1.f,
                dyc + kb * kBlock * ld, ld, cols, ld, beta, relay, k_);
    rows_into(b, relay, kb, dw);
  }
}

float* Im2colConv::relay(float* workspace) const { return workspace + columns_floats(); }

std::string Im2colConv::algorithm() const {
  return fmt::format("im2col+sgemm ({} images per chunk)", chunk_);
}

void Im2colConv::forward(const float* x, const float* w, float* y, float* cols) const {
  const ConvDesc& d = d_;
  for (int64_t n0 = 0; n0 < d.batch; n0 += chunk_) {
    const int64_t nb = std::min(chunk_, d.batch - n0);
    const int64_t ld = nb * hw_out_;
    float* out = cols + k_ * ld;  // [cout_g, nb * hw_out]
    for (int64_t grp = 0; grp < d.groups; ++grp) {
      for (int64_t i = 0; i < nb; ++i) {
        im2col(d, x + ((n0 + i) * d.in_channels + grp * cin_g_) * hw_in_, cols, ld, i * hw_out_);
      }
      weights_times(w, grp, cols, ld, out, relay(cols));
      for (int64_t i = 0; i < nb; ++i) {
        float* yn = y + ((n0 + i) * d.out_channels + grp * cout_g_) * hw_out_;
        for (int64_t co = 0; co < cout_g_; ++co) {
          std::memcpy(yn + co * hw_out_, out + co * ld + i * hw_out_, hw_out_ * sizeof(float));
        }
      }
    }
  }
}

namespace {
// dy of images [n0, n0 + nb), one group, as the GEMM operand [cout_g, nb * pixels].
void gather_output_grad(const ConvDesc& d, const float* dy, int64_t n0, int64_t nb, int64_t grp,
                        float* out) {
  const int64_t cout_g = d.out_channels / d.groups, hw_out = d.out_h() * d.out_w();
  const int64_t ld = nb * hw_out;
  for (int64_t i = 0; i < nb; ++i) {
    const float* dyn = dy + ((n0 + i) * d.out_channels + grp * cout_g) * hw_out;
    for (int64_t co = 0; co < cout_g; ++co) {
      std::memcpy(out + co * ld + i * hw_out, dyn + co * hw_out, hw_out * sizeof(float));
    }
  }
}
}  // namespace

void Im2colConv::backward_data(const float* dy, const float* w, float* dx, float* cols) const {
  const ConvDesc& d = d_;
  std::fill(dx, dx + d.batch * d.in_channels * hw_in_, 0.f);
  for (int64_t n0 = 0; n0 < d.batch; n0 += chunk_) {
    const int64_t nb = std::min(chunk_, d.batch - n0);
    const int64_t ld = nb * hw_out_;
    float* dyc = cols + k_ * ld;
    for (int64_t grp = 0; grp < d.groups; ++grp) {
      gather_output_grad(d, dy, n0, nb, grp, dyc);
      weights_transposed_times(w, grp, dyc, ld, cols, relay(cols));
      for (int64_t i = 0; i < nb; ++i) {
        col2im(d, cols, ld, i * hw_out_, dx + ((n0 + i) * d.in_channels + grp * cin_g_) * hw_in_);
      }
    }
  }
}

void Im2colConv::backward_filter(const float* x, const float* dy, float* dw, float* cols) const {
  const ConvDesc& d = d_;
  for (int64_t n0 = 0; n0 < d.batch; n0 += chunk_) {
    const int64_t nb = std::min(chunk_, d.batch - n0);
    const int64_t ld = nb * hw_out_;
    float* dyc = cols + k_ * ld;
    for (int64_t grp = 0; grp < d.groups; ++grp) {
      for (int64_t i = 0; i < nb; ++i) {
        im2col(d, x + ((n0 + i) * d.in_channels + grp * cin_g_) * hw_in_, cols, ld, i * hw_out_);
      }
      gather_output_grad(d, dy, n0, nb, grp, dyc);
      gradient_times(dyc, cols, ld, n0 > 0, grp, dw, relay(cols));
    }
  }
}

}  // namespace dlb
