// The instruction sets the CPU backend's own loops are compiled for. oneDNN and OpenBLAS pick
// their kernels for the CPU at run time; the backend's loops (batch norm, the mixed-precision
// update's conversions) are C++ in a portable x86-64 build, so each hot loop is compiled twice:
// for x86-64 (SSE2), and for AVX-512 (F, BW, VL and DQ), the wider one taken where the CPU has
// it. Both copies are one source (a *_loops.inl file) doing IEEE float and double arithmetic
// lane by lane, and their files are built contracting no multiply-add (-ffp-contract=off,
// runtime/CMakeLists.txt): they give the same bits (tests/unit/cpu_isa_test.cpp).
#pragma once

namespace dlb {

enum class CpuIsa { kX86_64, kAvx512 };

// The widest this CPU runs (AVX-512 F, BW, VL and DQ, or x86-64), found once.
CpuIsa host_cpu_isa();
const char* cpu_isa_name(CpuIsa isa);  // "x86-64", "avx512"
// Unsupported where this CPU cannot run `isa` (a caller asking for loops it would fault in).
void check_runs(CpuIsa isa);

}  // namespace dlb
