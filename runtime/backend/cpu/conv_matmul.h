// Convolution as im2col plus one oneDNN matrix product over the whole batch: every pass of a bf16
// layer on channels-last tensors (a bf16 run's layout on a CPU with AMX), and the backward-filter
// pass of a layer on NCHW ones, bf16 or f32. oneDNN 2.6's direct AMX kernels tile one row of
// output pixels at a time, so on a small feature map (resnet18's 2x2 layers at 64 px) AMX's
// 16-row tiles stay mostly empty; one product over every output pixel of the batch fills them
// (measured in docs/cpu.md). Each row of the columns holds one output pixel's window in (kernel
// row, kernel column, channel) order, the order in which channels-last (KRSC) weights hold an
// output channel's row, and channels last holds each pixel's channels together, so im2col copies
// whole runs of channels. A layer stored NCHW, f32 or bf16, has its backward-filter pass only:
// its x is copied channels last first, and gathered from that copy the same way. oneDNN 2.6's
// direct kernels tile that pass's rows of output pixels too, in f32 and with AVX-512 BF16.
#pragma once
#include <memory>
#include <string>

#include "runtime/backend/backend.h"

namespace dlb {

class MatmulConv {
 public:
  // Throws Unsupported unless the layer is ungrouped and either stores bf16 data and parameters,
  // where the CPU multiplies bf16 natively, or f32 ones with NCHW activations; and unless oneDNN
  // has each product (not only its reference loops).
  explicit MatmulConv(const ConvDesc& d);
  ~MatmulConv();
  MatmulConv(const MatmulConv&) = delete;
  MatmulConv& operator=(const MatmulConv&) = delete;

  // Whether it runs pass `p` (a layer stored NCHW: its backward-filter pass only), and else why
  // not.
  bool has(ConvPass p) const;
  std::string missing(ConvPass p) const;
  // What its products read: bf16, or f32.
  DType operands() const;

  // 0 for a pass it lacks. Else (an NCHW layer's) x copied channels last, the pass's columns
  // (none where a 1x1 layer at stride 1 without padding reads channels-last x as they), (an NCHW
  // layer's) dy as rows, its KRSC copy of the weights or their gradient where they are stored
  // otherwise, its f32 window terms (backward data) and oneDNN's scratchpad.
  size_t workspace_bytes(ConvPass p) const;
  // "im2col+matmul brg:avx512_core_amx_bf16": oneDNN's implementation of the pass's product.
  std::string algorithm(ConvPass p) const;

  // Operands of operands(): activations as ConvDesc::layout says, w as weight_layout says, dw as
  // grad_layout says. Products accumulate in f32 and round once on store. The forward pass adds
  // `bias` (one bf16 per output channel; may be null) before that rounding, as oneDNN's bf16
  // convolution does. Backward data sums each input pixel's window terms (f32 products of the
  // matrix product) in f32, kernel row by kernel column, and rounds once. `workspace` is
  // 64-byte aligned, workspace_bytes(pass) long.
  void forward(const void* x, const void* w, const void* bias, void* y, void* workspace) const;
  void backward_data(const void* dy, const void* w, void* dx, void* workspace) const;
  void backward_filter(const void* x, const void* dy, void* dw, void* workspace) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlb
