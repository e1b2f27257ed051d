// The element types of floating-point storage: f32, or the 16-bit storage of a mixed-precision
// run (fp16 or bf16, as bit patterns). A kernel loads each element into a float, computes in
// float, and stores the result back in its tensor's type, rounded to nearest even by
// runtime/core/half.h's integer conversions: the same bits on every backend and device, whatever
// its float modes. For f32, load and store are the identity, so an fp32 kernel is the same
// arithmetic as one written for float alone. Host and device (the CUDA backend's kernels and the
// CPU backend's element-wise ops both use these).
#pragma once
#include <cstdint>
#include <string>

#include "runtime/core/dtype.h"
#include "runtime/core/error.h"
#include "runtime/core/half.h"
#include "runtime/core/host_device.h"

namespace dlb {

struct F16 {
  uint16_t bits;
};
struct BF16 {
  uint16_t bits;
};

DLB_HD float load(float v) { return v; }
DLB_HD float load(F16 v) { return f16_to_float(v.bits); }
DLB_HD float load(BF16 v) { return bf16_to_float(v.bits); }

// `v` stored as a T (to nearest even where T is narrower).
template <typename T>
DLB_HD T stored(float v);
template <>
DLB_HD float stored<float>(float v) {
  return v;
}
template <>
DLB_HD F16 stored<F16>(float v) {
  return F16{float_to_f16(v)};
}
template <>
DLB_HD BF16 stored<BF16>(float v) {
  return BF16{float_to_bf16(v)};
}

// Inf or NaN, read from the stored bits (an all-ones exponent): no conversion, no float mode.
DLB_HD bool non_finite(float v) { return (float_bits(v) & 0x7f800000u) == 0x7f800000u; }
DLB_HD bool non_finite(F16 v) { return (v.bits & 0x7c00u) == 0x7c00u; }
DLB_HD bool non_finite(BF16 v) { return (v.bits & 0x7f80u) == 0x7f80u; }

template <typename T>
struct StorageDType;
template <>
struct StorageDType<float> {
  static constexpr DType value = DType::kF32;
};
template <>
struct StorageDType<F16> {
  static constexpr DType value = DType::kF16;
};
template <>
struct StorageDType<BF16> {
  static constexpr DType value = DType::kBF16;
};

// Calls f(T{}) with T the storage type `t` names; throws Unsupported for a type that holds no
// floats (i64 labels), naming `what`.
template <typename F>
decltype(auto) with_stored_float(DType t, const char* what, F&& f) {
  switch (t) {
    case DType::kF32:
      return f(float{});
    case DType::kF16:
      return f(F16{});
    case DType::kBF16:
      return f(BF16{});
    default:
      throw Unsupported(std::string(what) + " is " + std::string(dtype_name(t)) +
                        ", which holds no floats");
  }
}

}  // namespace dlb
