#include "runtime/backend/cpu/pool_loops.h"

#include "runtime/backend/cpu/isa_target.h"

namespace dlb {
namespace pool_x86_64 {
namespace {  // internal linkage: no symbol of one copy can stand in for the other's
#include "runtime/backend/cpu/pool_loops.inl"
}  // namespace
}  // namespace pool_x86_64

DLB_AVX512_BEGIN
namespace pool_avx512 {
namespace {  // internal linkage: no symbol of one copy can stand in for the other's
#include "runtime/backend/cpu/pool_loops.inl"
}  // namespace
}  // namespace pool_avx512
DLB_AVX512_END

template <typename T>
const PoolLoops<T>& pool_loops(CpuIsa isa) {
  check_runs(isa);
  return isa == CpuIsa::kAvx512 ? pool_avx512::kPoolLoops<T> : pool_x86_64::kPoolLoops<T>;
}
template const PoolLoops<float>& pool_loops(CpuIsa);
template const PoolLoops<F16>& pool_loops(CpuIsa);
template const PoolLoops<BF16>& pool_loops(CpuIsa);

}  // namespace dlb
