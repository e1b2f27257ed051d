// Compiles the functions between DLB_AVX512_BEGIN and DLB_AVX512_END, lambdas and templates
// included, for AVX-512 (F, BW, VL, DQ) in a portable build: a *_loops.cpp file includes its
// loops once plainly and once between these, each time in a namespace of its own, so that no
// symbol of the AVX-512 copy can stand in for the portable one. Functions defined before (the
// headers') stay portable and may be inlined into the AVX-512 copy. Callers reach the AVX-512
// copy only where host_cpu_isa() says the CPU has it (runtime/backend/cpu/isa.h).
#pragma once

#if defined(__clang__)
#define DLB_AVX512_BEGIN \
  _Pragma(               \
      "clang attribute push(__attribute__((target(\"avx512f,avx512bw,avx512vl,avx512dq\"))), \
          apply_to = function)")
#define DLB_AVX512_END _Pragma("clang attribute pop")
#elif defined(__GNUC__)
#define DLB_AVX512_BEGIN \
  _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx512bw,avx512vl,avx512dq\")")
#define DLB_AVX512_END _Pragma("GCC pop_options")
#else
#error "the CPU backend's loops need GCC or clang (function target attributes)"
#endif
