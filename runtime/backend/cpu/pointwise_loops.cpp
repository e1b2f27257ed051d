#include "runtime/backend/cpu/pointwise_loops.h"

#include "runtime/backend/cpu/isa_target.h"

namespace dlb {
namespace pointwise_x86_64 {
namespace {  // internal linkage: no symbol of one copy can stand in for the other's
#include "runtime/backend/cpu/pointwise_loops.inl"
}  // namespace
}  // namespace pointwise_x86_64

DLB_AVX512_BEGIN
namespace pointwise_avx512 {
namespace {  // internal linkage: no symbol of one copy can stand in for the other's
#include "runtime/backend/cpu/pointwise_loops.inl"
}  // namespace
}  // namespace pointwise_avx512
DLB_AVX512_END

template <typename T>
const PointwiseLoops<T>& pointwise_loops(CpuIsa isa) {
  check_runs(isa);
  return isa == CpuIsa::kAvx512 ? pointwise_avx512::kPointwiseLoops<T>
                                : pointwise_x86_64::kPointwiseLoops<T>;
}
template const PointwiseLoops<float>& pointwise_loops(CpuIsa);
template const PointwiseLoops<F16>& pointwise_loops(CpuIsa);
template const PointwiseLoops<BF16>& pointwise_loops(CpuIsa);

const SgdLoops& sgd_loops(CpuIsa isa) {
  check_runs(isa);
  return isa == CpuIsa::kAvx512 ? pointwise_avx512::kSgdLoops : pointwise_x86_64::kSgdLoops;
}

template <typename G, typename C>
const SgdCopyLoops<G, C>& sgd_copy_loops(CpuIsa isa) {
  check_runs(isa);
  return isa == CpuIsa::kAvx512 ? pointwise_avx512::kSgdCopyLoops<G, C>
                                : pointwise_x86_64::kSgdCopyLoops<G, C>;
}
template const SgdCopyLoops<F16, F16>& sgd_copy_loops(CpuIsa);
template const SgdCopyLoops<F16, BF16>& sgd_copy_loops(CpuIsa);
template const SgdCopyLoops<BF16, F16>& sgd_copy_loops(CpuIsa);
template const SgdCopyLoops<BF16, BF16>& sgd_copy_loops(CpuIsa);

}  // namespace dlb
