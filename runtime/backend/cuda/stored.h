// The CUDA backend's kernels' element types (runtime/core/stored_float.h: f32, fp16 or bf16
// storage, loaded into float and stored rounded to nearest even), their 16-byte packs, and the
// dispatch on a tensor's type. Host-compilable: includes nothing of CUDA.
#pragma once
#include <cstdint>
#include <cstring>

#include "runtime/core/dtype.h"
#include "runtime/core/error.h"
#include "runtime/core/half.h"
#include "runtime/core/host_device.h"
#include "runtime/core/stored_float.h"

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

// The element types and their loads and stores: runtime/core/stored_float.h.
using dlb::BF16;
using dlb::F16;
using dlb::load;
using dlb::non_finite;
using dlb::StorageDType;
using dlb::stored;

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
