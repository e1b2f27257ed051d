#include "runtime/backend/cpu/isa.h"

#include "runtime/core/error.h"

namespace dlb {

CpuIsa host_cpu_isa() {
  static const CpuIsa isa = [] {
    __builtin_cpu_init();
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    return avx512 ? CpuIsa::kAvx512 : CpuIsa::kX86_64;
  }();
  return isa;
}

const char* cpu_isa_name(CpuIsa isa) { return isa == CpuIsa::kAvx512 ? "avx512" : "x86-64"; }

void check_runs(CpuIsa isa) {
  if (isa == CpuIsa::kAvx512 && host_cpu_isa() != CpuIsa::kAvx512) {
    throw Unsupported("this CPU lacks AVX-512 (F, BW, VL, DQ): its loops cannot run here");
  }
}

}  // namespace dlb
