#include "runtime/backend/cpu/batch_norm_loops.h"

#include <cmath>

#include "runtime/backend/cpu/isa_target.h"

namespace dlb {
namespace bn_x86_64 {
#include "runtime/backend/cpu/batch_norm_loops.inl"
}  // namespace bn_x86_64

DLB_AVX512_BEGIN
namespace bn_avx512 {
#include "runtime/backend/cpu/batch_norm_loops.inl"
}  // namespace bn_avx512
DLB_AVX512_END

template <typename T>
const BnLoops<T>& bn_loops(CpuIsa isa) {
  return isa == CpuIsa::kAvx512 ? bn_avx512::kBnLoops<T> : bn_x86_64::kBnLoops<T>;
}

template const BnLoops<float>& bn_loops(CpuIsa);
template const BnLoops<F16>& bn_loops(CpuIsa);
template const BnLoops<BF16>& bn_loops(CpuIsa);

}  // namespace dlb
