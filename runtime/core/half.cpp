#include "runtime/core/half.h"

#include <fmt/format.h>

#include "runtime/core/error.h"

namespace dlb {

void floats_to_dtype(const float* src, int64_t n, DType to, void* dst) {
  auto* d = static_cast<uint16_t*>(dst);
  switch (to) {
    case DType::kF32:
      memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) d[i] = float_to_f16(src[i]);
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(src[i]);
      return;
    default:
      throw InvalidArgument(fmt::format("floats cannot be stored as {}", dtype_name(to)));
  }
}

float stored_value(float x, DType t) {
  uint16_t bits[2];  // room for an f32 too
  floats_to_dtype(&x, 1, t, bits);
  float out = 0;
  dtype_to_floats(bits, 1, t, &out);
  return out;
}

void dtype_to_floats(const void* src, int64_t n, DType from, float* dst) {
  const auto* s = static_cast<const uint16_t*>(src);
  switch (from) {
    case DType::kF32:
      memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_float(s[i]);
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(s[i]);
      return;
    default:
      throw InvalidArgument(fmt::format("{} values are not floats", dtype_name(from)));
  }
}

}  // namespace dlb
