// Matrix products of bf16 matrices through oneDNN's matmul primitive, which multiplies them
// natively where the CPU has AVX-512 BF16 (dot products of bf16 pairs accumulated in f32) and
// rounds the result once on store, as PyTorch's CPU autocast does.
#pragma once
#include <cstdint>

namespace dlb {

// Whether oneDNN multiplies bf16 matrices here with more than its reference loops (asked once).
bool onednn_multiplies_bf16();

// Row-major c[m, n] = alpha op(a) op(b) + beta c, every matrix bf16; op transposes when asked.
// Throws DeviceError when oneDNN fails.
struct Bf16Product {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1, beta = 0;
};
void onednn_matmul_bf16(const Bf16Product& p, const void* a, const void* b, void* c);

}  // namespace dlb
