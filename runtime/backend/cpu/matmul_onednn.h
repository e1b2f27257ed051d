// Matrix products of bf16 matrices through oneDNN's matmul primitive, where the CPU multiplies
// bf16 natively (AVX-512 BF16: dot products of bf16 pairs accumulated in f32), rounding the
// result once on store, as PyTorch's CPU autocast does.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace dlb {

// A row-major product c[m, n] = alpha op(a) op(b) + beta c; op transposes when asked.
struct MatrixProduct {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1, beta = 0;
};

// oneDNN's bf16 primitive for one product, made once per product shape and kept (where
// cpu_multiplies_bf16, onednn_engine.h).
class OnednnBf16Product {
 public:
  // Null when oneDNN has no native primitive for it (its reference loops, or no bf16 here).
  static const OnednnBf16Product* find(const MatrixProduct& p);
  // Its scratchpad, which the caller provides (the backend's workspace).
  size_t workspace_bytes() const { return workspace_bytes_; }
  // Every matrix bf16; `workspace` workspace_bytes() long. Throws DeviceError when oneDNN fails.
  void run(const void* a, const void* b, void* c, void* workspace) const;

  struct Impl;
  explicit OnednnBf16Product(std::unique_ptr<Impl> impl);
  ~OnednnBf16Product();

 private:
  std::unique_ptr<Impl> impl_;
  size_t workspace_bytes_ = 0;
};

}  // namespace dlb
