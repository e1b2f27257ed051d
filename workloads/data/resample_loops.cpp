#include "workloads/data/resample_loops.h"

#include <algorithm>
#include <vector>

#include "runtime/backend/cpu/isa_target.h"

namespace dlb {
namespace resample_x86_64 {
namespace {  // internal linkage: no symbol of one copy can stand in for the other's
constexpr bool kTransposedRows = false;
#include "workloads/data/resample_loops.inl"
constexpr ResampleLoops kTransposedLoops{rows_transposed, columns};
}  // namespace
}  // namespace resample_x86_64

DLB_AVX512_BEGIN
namespace resample_avx512 {
namespace {  // internal linkage: no symbol of one copy can stand in for the other's
constexpr bool kTransposedRows = true;
#include "workloads/data/resample_loops.inl"
}  // namespace
}  // namespace resample_avx512
DLB_AVX512_END

const ResampleLoops& resample_loops_transposed_x86_64() {
  return resample_x86_64::kTransposedLoops;
}

const ResampleLoops& resample_loops(CpuIsa isa) {
  check_runs(isa);
  return isa == CpuIsa::kAvx512 ? resample_avx512::kResampleLoops : resample_x86_64::kResampleLoops;
}

}  // namespace dlb
