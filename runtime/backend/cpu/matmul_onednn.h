// Matrix products through oneDNN's matmul primitive: of bf16 matrices where the CPU multiplies
// bf16 natively (AVX-512 BF16: dot products of bf16 pairs accumulated in f32), rounding the
// result once on store, as PyTorch's CPU autocast does; and of f32 ones, where oneDNN's kernels
// ran the models' products 1.5x to 6x as fast as OpenBLAS's sgemm on an AVX-512 host (docs/cpu.md).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/core/dtype.h"

namespace dlb {

// A row-major product c[m, n] = alpha op(a) op(b) + beta c; op transposes when asked.
struct MatrixProduct {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1, beta = 0;
};

// oneDNN's primitive for one product of matrices of one type, bf16 (where cpu_multiplies_bf16,
// onednn_engine.h) or f32, made once per product shape and type and kept.
class OnednnProduct {
 public:
  // Null when oneDNN has no primitive for it but its reference loops, or (bf16) the CPU does not
  // multiply bf16.
  static const OnednnProduct* find(const MatrixProduct& p, DType type);
  // Its scratchpad, which the caller provides (the backend's workspace).
  size_t workspace_bytes() const { return workspace_bytes_; }
  // Every matrix of the type it was found for; `workspace` workspace_bytes() long. Throws
  // DeviceError when oneDNN fails.
  void run(const void* a, const void* b, void* c, void* workspace) const;

  struct Impl;
  explicit OnednnProduct(std::unique_ptr<Impl> impl);
  ~OnednnProduct();

 private:
  std::unique_ptr<Impl> impl_;
  size_t workspace_bytes_ = 0;
};

}  // namespace dlb
