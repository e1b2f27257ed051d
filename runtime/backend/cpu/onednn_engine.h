// oneDNN on this CPU: the one engine every oneDNN primitive of the backend is made on, and whether
// oneDNN multiplies bf16 natively here.
#pragma once
#include "runtime/backend/backend.h"

namespace dnnl {
struct engine;
}

namespace dlb {

// Engines are thread-safe; each primitive's caller makes a stream of its own where it runs.
const dnnl::engine& onednn_cpu_engine();

// Whether this CPU multiplies bf16 natively: oneDNN's effective instruction set has AVX-512 BF16
// (or AMX, which includes it). Elsewhere oneDNN would emulate bf16 on AVX-512 (no faster than
// f32, and not what a bf16 run means here): the backend then computes bf16 on f32 copies.
bool cpu_multiplies_bf16();

// Whether oneDNN's effective instruction set here has AMX's tile multiplications (which it then
// prefers for bf16), beside AVX-512 BF16.
bool cpu_has_amx();

// Whether oneDNN's direct convolutions here block channels by 16 (its effective instruction set
// has AVX-512): then they read weights in OIhw16i16o (Layout::kOIhw16i16o). AVX2's block by 8.
bool cpu_blocks_channels_by_16();

// Whether an op of these types multiplies natively in bf16 here: bf16 data and parameters (a
// bf16 run's convolutions and matrix products), on a CPU that multiplies bf16.
bool native_bf16(const OpTypes& t);

}  // namespace dlb
