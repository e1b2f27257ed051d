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

// Floats of the KCRS copy of weights stored otherwise (ConvDesc::weight_layout), which the GEMMs
// read and write; none for KCRS weights.
size_t relaid_weight_floats(const ConvDesc& d) {
  if (d.weight_layout == Layout::kNCHW) return 0;
  return static_cast<size_t>(d.out_channels * (d.in_channels / d.groups) * d.kernel_h * d.kernel_w);
}

Shape weight_shape(const ConvDesc& d) {
  return {d.out_channels, d.in_channels / d.groups, d.kernel_h, d.kernel_w};
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
  const size_t per_image = floats_per_image(d), weights = relaid_weight_floats(d);
  size_t max_floats = kMaxWorkspaceFloats;
  if (workspace_limit) {
    if ((per_image + weights) * sizeof(float) > *workspace_limit) return std::nullopt;
    max_floats = std::min(max_floats, *workspace_limit / sizeof(float) - weights);
  }
  return Im2colConv(d,
                    std::clamp<int64_t>(static_cast<int64_t>(max_floats / per_image), 1, d.batch));
}

size_t Im2colConv::min_workspace_bytes(const ConvDesc& d) {
  return (floats_per_image(d) + relaid_weight_floats(d)) * sizeof(float);
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
  return (columns_floats() + relaid_weight_floats(d_)) * sizeof(float);
}

size_t Im2colConv::columns_floats() const {
  return static_cast<size_t>((k_ + cout_g_) * hw_out_ * chunk_);
}

const float* Im2colConv::kcrs_weights(const float* w, float* workspace) const {
  if (d_.weight_layout == Layout::kNCHW) return w;
  float* kcrs = workspace + columns_floats();
  relayout_floats(weight_shape(d_), d_.weight_layout, w, Layout::kNCHW, kcrs);
  return kcrs;
}

void Im2colConv::forward(const float* x, const float* w, float* y, float* workspace) const {
  gemm_forward(x, kcrs_weights(w, workspace), y, workspace);
}

void Im2colConv::backward_data(const float* dy, const float* w, float* dx, float* workspace) const {
  gemm_backward_data(dy, kcrs_weights(w, workspace), dx, workspace);
}

void Im2colConv::backward_filter(const float* x, const float* dy, float* dw,
                                 float* workspace) const {
  if (d_.weight_layout == Layout::kNCHW) return gemm_backward_filter(x, dy, dw, workspace);
  float* kcrs = workspace + columns_floats();
  gemm_backward_filter(x, dy, kcrs, workspace);
  relayout_floats(weight_shape(d_), Layout::kNCHW, kcrs, d_.weight_layout, dw);
}

std::string Im2colConv::algorithm() const {
  return fmt::format("im2col+sgemm ({} images per chunk)", chunk_);
}

void Im2colConv::gemm_forward(const float* x, const float* w, float* y, float* cols) const {
  const ConvDesc& d = d_;
  for (int64_t n0 = 0; n0 < d.batch; n0 += chunk_) {
    const int64_t nb = std::min(chunk_, d.batch - n0);
    const int64_t ld = nb * hw_out_;
    float* out = cols + k_ * ld;  // [cout_g, nb * hw_out]
    for (int64_t grp = 0; grp < d.groups; ++grp) {
      for (int64_t i = 0; i < nb; ++i) {
        im2col(d, x + ((n0 + i) * d.in_channels + grp * cin_g_) * hw_in_, cols, ld, i * hw_out_);
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, cout_g_, ld, k_, 1.f,
                  w + grp * cout_g_ * k_, k_, cols, ld, 0.f, out, ld);
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

void Im2colConv::gemm_backward_data(const float* dy, const float* w, float* dx, float* cols) const {
  const ConvDesc& d = d_;
  std::fill(dx, dx + d.batch * d.in_channels * hw_in_, 0.f);
  for (int64_t n0 = 0; n0 < d.batch; n0 += chunk_) {
    const int64_t nb = std::min(chunk_, d.batch - n0);
    const int64_t ld = nb * hw_out_;
    float* dyc = cols + k_ * ld;
    for (int64_t grp = 0; grp < d.groups; ++grp) {
      gather_output_grad(d, dy, n0, nb, grp, dyc);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k_, ld, cout_g_, 1.f,
                  w + grp * cout_g_ * k_, k_, dyc, ld, 0.f, cols, ld);
      for (int64_t i = 0; i < nb; ++i) {
        col2im(d, cols, ld, i * hw_out_, dx + ((n0 + i) * d.in_channels + grp * cin_g_) * hw_in_);
      }
    }
  }
}

void Im2colConv::gemm_backward_filter(const float* x, const float* dy, float* dw,
                                      float* cols) const {
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
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, cout_g_, k_, ld, 1.f, dyc, ld, cols, ld,
                  n0 == 0 ? 0.f : 1.f, dw + grp * cout_g_ * k_, k_);
    }
  }
}

}  // namespace dlb
