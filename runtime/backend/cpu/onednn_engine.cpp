#include "runtime/backend/cpu/onednn_engine.h"

#include <oneapi/dnnl/dnnl.hpp>

namespace dlb {

const dnnl::engine& onednn_cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

namespace {
// Whether oneDNN's effective instruction set here includes all of `isa` (the enum's values are
// bit sets, each holding the sets below it).
bool effective_isa_includes(dnnl::cpu_isa isa) {
  const auto bits = static_cast<unsigned>(isa);
  return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & bits) == bits;
}
}  // namespace

bool cpu_multiplies_bf16() {
  static const bool native = effective_isa_includes(dnnl::cpu_isa::avx512_core_bf16);
  return native;
}

bool cpu_has_amx() {
  static const bool amx = effective_isa_includes(dnnl::cpu_isa::avx512_core_amx);
  return amx;
}

bool cpu_blocks_channels_by_16() {
  static const bool avx512 = effective_isa_includes(dnnl::cpu_isa::avx512_core);
  return avx512;
}

bool native_bf16(const OpTypes& t) {
  return t.data == DType::kBF16 && t.params == DType::kBF16 && cpu_multiplies_bf16();
}

}  // namespace dlb
