#include "runtime/backend/cpu/batch_norm_loops.h"

#include <cmath>
#include <vector>

#include "runtime/backend/cpu/isa_target.h"

namespace dlb {
namespace bn_x86_64 {
namespace {  // internal linkage: no symbol of one copy can stand in for the other's
#include "runtime/backend/cpu/batch_norm_loops.inl"
}  // namespace
}  // namespace bn_x86_64

DLB_AVX512_BEGIN
namespace bn_avx512 {
namespace {  // internal linkage: no symbol of one copy can stand in for the other's
#include "runtime/backend/cpu/batch_norm_loops.inl"
}  // namespace
}  // namespace bn_avx512
DLB_AVX512_END

template <typename T>
const BnLoops<T>& bn_loops(CpuIsa isa) {
  check_runs(isa);
  return isa == CpuIsa::kAvx512 ? bn_avx512::kBnLoops<T> : bn_x86_64::kBnLoops<T>;
}

template const BnLoops<float>& bn_loops(CpuIsa);
template const BnLoops<F16>& bn_loops(CpuIsa);
template const BnLoops<BF16>& bn_loops(CpuIsa);

}  // namespace dlb
