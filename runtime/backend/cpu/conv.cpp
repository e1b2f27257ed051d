// Convolution as im2col plus one sgemm per group over a chunk of images. Packing several images
// side by side keeps the GEMM wide when the late layers' feature maps are only a few pixels.
#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/f32_views.h"
#include "runtime/core/error.h"

namespace dlb {
namespace {

constexpr size_t kMaxWorkspaceFloats = size_t{16} << 20;  // 64 MiB of columns per chunk

struct Geometry {
  int64_t cin_g, cout_g, k, hw_out, hw_in, chunk;
};

// The chunk is as many images as fit in 64 MiB of columns, or in the workspace limit when that
// is smaller; one image that does not fit the limit is an error (there is no other algorithm).
Geometry geometry(const ConvDesc& d, std::optional<size_t> workspace_limit) {
  Geometry g;
  g.cin_g = d.in_channels / d.groups;
  g.cout_g = d.out_channels / d.groups;
  g.k = g.cin_g * d.kernel_h * d.kernel_w;
  g.hw_out = d.out_h() * d.out_w();
  g.hw_in = d.height * d.width;
  const size_t per_image = static_cast<size_t>((g.k + g.cout_g) * g.hw_out);
  size_t max_floats = kMaxWorkspaceFloats;
  if (workspace_limit) {
    if (per_image * sizeof(float) > *workspace_limit) {
      throw InvalidArgument(fmt::format(
          "conv {}x{}, {}->{} channels on {}x{}: im2col needs at least {} of workspace (one "
          "image's columns), above --workspace-limit={}; the CPU backend has no algorithm that "
          "needs less",
          d.kernel_h, d.kernel_w, d.in_channels, d.out_channels, d.height, d.width,
          format_bytes(per_image * sizeof(float)), format_bytes(*workspace_limit)));
    }
    max_floats = std::min(max_floats, *workspace_limit / sizeof(float));
  }
  g.chunk = std::clamp<int64_t>(static_cast<int64_t>(max_floats / per_image), 1, d.batch);
  return g;
}

class CpuConvPlan final : public ConvPlan {
 public:
  CpuConvPlan(const ConvDesc& d, std::optional<size_t> workspace_limit)
      : ConvPlan(d), geo_(geometry(d, workspace_limit)) {}
  size_t workspace_bytes() const override {
    return static_cast<size_t>((geo_.k + geo_.cout_g) * geo_.hw_out * geo_.chunk) * sizeof(float);
  }
  // One algorithm for every pass: im2col (or col2im) around one sgemm per group and chunk.
  std::vector<PassAlgorithm> algorithms() const override {
    std::vector<PassAlgorithm> out;
    for (ConvPass p : kConvPasses) {
      out.push_back(
          {p, fmt::format("im2col+sgemm ({} images per chunk)", geo_.chunk), workspace_bytes()});
    }
    return out;
  }
  const Geometry& geo() const { return geo_; }

 private:
  Geometry geo_;
};

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

// dy of images [n0, n0 + nb), one group, as the GEMM operand [cout_g, nb * pixels].
void gather_output_grad(const ConvDesc& d, const Geometry& g, const Tensor& dy, int64_t n0,
                        int64_t nb, int64_t grp, float* out) {
  const int64_t ld = nb * g.hw_out;
  for (int64_t i = 0; i < nb; ++i) {
    const float* dyn = dy.data<float>() + ((n0 + i) * d.out_channels + grp * g.cout_g) * g.hw_out;
    for (int64_t co = 0; co < g.cout_g; ++co) {
      std::memcpy(out + co * ld + i * g.hw_out, dyn + co * g.hw_out, g.hw_out * sizeof(float));
    }
  }
}

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
  const ConvDesc& d = plan.desc();
  const Geometry& g = plan.geo();
  check_conv_tensors(d, x, w, y);
  float* cols = scratch(plan.workspace_bytes() / sizeof(float));
  for (int64_t n0 = 0; n0 < d.batch; n0 += g.chunk) {
    const int64_t nb = std::min(g.chunk, d.batch - n0);
    const int64_t ld = nb * g.hw_out;
    float* out = cols + g.k * ld;  // [cout_g, nb * hw_out]
    for (int64_t grp = 0; grp < d.groups; ++grp) {
      for (int64_t i = 0; i < nb; ++i) {
        im2col(d, x.data<float>() + ((n0 + i) * d.in_channels + grp * g.cin_g) * g.hw_in, cols, ld,
               i * g.hw_out);
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g.cout_g, ld, g.k, 1.f,
                  w.data<float>() + grp * g.cout_g * g.k, g.k, cols, ld, 0.f, out, ld);
      for (int64_t i = 0; i < nb; ++i) {
        float* yn = y.data<float>() + ((n0 + i) * d.out_channels + grp * g.cout_g) * g.hw_out;
        for (int64_t co = 0; co < g.cout_g; ++co) {
          std::memcpy(yn + co * g.hw_out, out + co * ld + i * g.hw_out, g.hw_out * sizeof(float));
        }
      }
    }
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
  const ConvDesc& d = plan.desc();
  const Geometry& g = plan.geo();
  check_conv_tensors(d, dx, w, dy);
  std::fill(dx.data<float>(), dx.data<float>() + dx.numel(), 0.f);
  float* cols = scratch(plan.workspace_bytes() / sizeof(float));
  for (int64_t n0 = 0; n0 < d.batch; n0 += g.chunk) {
    const int64_t nb = std::min(g.chunk, d.batch - n0);
    const int64_t ld = nb * g.hw_out;
    float* dyc = cols + g.k * ld;
    for (int64_t grp = 0; grp < d.groups; ++grp) {
      gather_output_grad(d, g, dy, n0, nb, grp, dyc);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, g.k, ld, g.cout_g, 1.f,
                  w.data<float>() + grp * g.cout_g * g.k, g.k, dyc, ld, 0.f, cols, ld);
      for (int64_t i = 0; i < nb; ++i) {
        col2im(d, cols, ld, i * g.hw_out,
               dx.data<float>() + ((n0 + i) * d.in_channels + grp * g.cin_g) * g.hw_in);
      }
    }
  }
}

void CpuBackend::conv_backward_filter(const ConvPlan& plan_, const Tensor& x_s, const Tensor& dy_s,
                                      Tensor& dw_s) {
  F32Views f32(*this);
  const Tensor& x = f32.in(x_s);
  const Tensor& dy = f32.in(dy_s);
  Tensor& dw = f32.out(dw_s);
  const auto& plan = cpu_plan(plan_);
  const ConvDesc& d = plan.desc();
  const Geometry& g = plan.geo();
  check_conv_tensors(d, x, dw, dy);
  float* cols = scratch(plan.workspace_bytes() / sizeof(float));
  for (int64_t n0 = 0; n0 < d.batch; n0 += g.chunk) {
    const int64_t nb = std::min(g.chunk, d.batch - n0);
    const int64_t ld = nb * g.hw_out;
    float* dyc = cols + g.k * ld;
    for (int64_t grp = 0; grp < d.groups; ++grp) {
      for (int64_t i = 0; i < nb; ++i) {
        im2col(d, x.data<float>() + ((n0 + i) * d.in_channels + grp * g.cin_g) * g.hw_in, cols, ld,
               i * g.hw_out);
      }
      gather_output_grad(d, g, dy, n0, nb, grp, dyc);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g.cout_g, g.k, ld, 1.f, dyc, ld, cols,
                  ld, n0 == 0 ? 0.f : 1.f, dw.data<float>() + grp * g.cout_g * g.k, g.k);
    }
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
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch) {
      float* row = yp + (i * c + ch) * inner;
      for (int64_t k = 0; k < inner; ++k) row[k] += bp[ch];
    }
}

void CpuBackend::bias_backward(const Tensor& dy_s, Tensor& db_s) {
  F32Views f32(*this);
  const Tensor& dy = f32.in(dy_s);
  Tensor& db = f32.out(db_s);
  check_f32(dy, "bias gradient input");
  check_f32(db, "bias gradient");
  const int64_t n = dy.dim(0), c = dy.dim(1), inner = dy.numel() / (n * c);
  const float* g = dy.data<float>();
  for (int64_t ch = 0; ch < c; ++ch) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* row = g + (i * c + ch) * inner;
      for (int64_t k = 0; k < inner; ++k) s += row[k];
    }
    db.data<float>()[ch] = static_cast<float>(s);
  }
}

}  // namespace dlb
