// The element types of the CUDA backend's kernels: f32, or the 16-bit storage of a mixed-precision
// run (fp16 or bf16, as bit patterns). A kernel loads each element into a float, computes in
// float, and stores the result back in its tensor's type, rounded to nearest even by
// runtime/core/half.h's integer conversions: the same bits as the CPU backend's 16-bit storage,
// whichever device runs them and whatever its float modes. For f32, load and store are the
// identity, so an fp32 kernel is the same arithmetic as before 16-bit storage existed.
// Host-compilable: includes nothing of CUDA.
#pragma once
#include <cstdint>
#include <cstring>

#include "runtime/core/dtype.h"
#include "runtime/core/error.h"
#include "runtime/core/half.h"
#include "runtime/core/host_device.h"

namespace dlb::cuda {

// 16 bytes of T: what one thread of a vectorized element-wise kernel loads or stores at once
// (one 128-bit access instead of 16 / sizeof(T)), where its tensors start 16-byte aligned.
template <typename T>
struct alignas(16) Pack {
  static constexpr int kSize = static_cast<int>(16 / sizeof(T));
  T v[kSize];
};
DLB_HD bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
// Elements [i, i + Pack<T>::kSize) of `p` (16-byte aligned there), and their store. On the device
// one vector access; on the host a copy of the bytes (no access through another type).
template <typename T>
DLB_HD Pack<T> pack_at(const T* p, int64_t i) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const Pack<T>*>(p + i);
#else
  Pack<T> out;
  std::memcpy(&out, p + i, sizeof(out));
  return out;
#endif
}
template <typename T>
DLB_HD void put_pack(T* p, int64_t i, const Pack<T>& v) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<Pack<T>*>(p + i) = v;
#else
  std::memcpy(p + i, &v, sizeof(v));
#endif
}

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

// Calls f(T{}) with T the storage type of `t`; throws Unsupported for a type that holds no
// floats (i64 labels). `what` names the operand in the message.
template <typename F>
decltype(auto) with_storage(DType t, const char* what, F&& f) {
  switch (t) {
    case DType::kF32:
      return f(float{});
    case DType::kF16:
      return f(F16{});
    case DType::kBF16:
      return f(BF16{});
    default:
      throw Unsupported(std::string("cuda: ") + what + " is " + std::string(dtype_name(t)) +
                        ", which holds no floats");
  }
}

}  // namespace dlb::cuda
