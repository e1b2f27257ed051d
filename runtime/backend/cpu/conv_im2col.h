// Convolution as im2col plus one sgemm per group over a chunk of images: the reference algorithm
// of the CPU backend. Packing several images side by side keeps the GEMM wide when the late
// layers' feature maps are only a few pixels. Columns, and the GEMM's output, are workspace.
#pragma once
#include <optional>
#include <string>

#include "runtime/backend/backend.h"

namespace dlb {

class Im2colConv {
 public:
  // As many images per chunk as fit in 64 MiB of columns, or in `workspace_limit` (less the relay
  // of blocked weights) when that is smaller; nullopt when one image's columns and the relay do
  // not fit the limit.
  static std::optional<Im2colConv> fit(const ConvDesc& d, std::optional<size_t> workspace_limit);
  // The least workspace it can run in: one image's columns, and the relay of blocked weights.
  static size_t min_workspace_bytes(const ConvDesc& d);

  size_t workspace_bytes() const;
  std::string algorithm() const;  // "im2col+sgemm (16 images per chunk)"

  // NCHW f32 operands, and weights stored as ConvDesc::weight_layout says (blocked ones reach
  // the GEMMs through a relay of 16 channels' KCRS values, after the columns: each output sums
  // the same products in the same order, though OpenBLAS may round a 16-row GEMM's long sums
  // otherwise than the whole one's); `workspace` holds workspace_bytes().
  void forward(const float* x, const float* w, float* y, float* workspace) const;
  void backward_data(const float* dy, const float* w, float* dx, float* workspace) const;
  void backward_filter(const float* x, const float* dy, float* dw, float* workspace) const;

 private:
  Im2colConv(const ConvDesc& d, int64_t chunk);
  size_t columns_floats() const;
  float* relay(float* workspace) const;  // after the columns
  void weights_times(const float* w, int64_t grp, const float* cols, int64_t ld, float* out,
                     float* relay) const;
  void weights_transposed_times(const float* w, int64_t grp, const float* dyc, int64_t ld,
                                float* cols, float* relay) const;
  void gradient_times(const float* dyc, const float* cols, int64_t ld, bool accumulate, int64_t grp,
                      float* dw, float* relay) const;
  ConvDesc d_;
  int64_t cin_g_, cout_g_, k_, hw_out_, hw_in_, chunk_;
};

}  // namespace dlb
