#include "runtime/backend/cpu/onednn_engine.h"

#include <oneapi/dnnl/dnnl.hpp>

namespace dlb {

const dnnl::engine& onednn_cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

bool cpu_multiplies_bf16() {
  const auto bits = [](dnnl::cpu_isa isa) { return static_cast<unsigned>(isa); };
  static const bool native =
      (bits(dnnl::get_effective_cpu_isa()) & bits(dnnl::cpu_isa::avx512_core_bf16)) ==
      bits(dnnl::cpu_isa::avx512_core_bf16);
  return native;
}

bool cpu_has_amx() {
  const auto bits = [](dnnl::cpu_isa isa) { return static_cast<unsigned>(isa); };
  static const bool amx =
      (bits(dnnl::get_effective_cpu_isa()) & bits(dnnl::cpu_isa::avx512_core_amx)) ==
      bits(dnnl::cpu_isa::avx512_core_amx);
  return amx;
}

bool cpu_blocks_channels_by_16() {
  const auto bits = [](dnnl::cpu_isa isa) { return static_cast<unsigned>(isa); };
  static const bool avx512 = (bits(dnnl::get_effective_cpu_isa()) &
                              bits(dnnl::cpu_isa::avx512_core)) == bits(dnnl::cpu_isa::avx512_core);
  return avx512;
}

bool native_bf16(const OpTypes& t) {
  return t.data == DType::kBF16 && t.params == DType::kBF16 && cpu_multiplies_bf16();
}

}  // namespace dlb
