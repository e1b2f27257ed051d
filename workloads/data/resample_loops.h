// The loops of PIL's antialiased bilinear resize on 8-bit RGB (HWC) rows, with the fixed-point
// taps of runtime/core/resample.h: integer sums, so every order and width of vector gives the same
// bytes. Compiled for x86-64 and for AVX-512 (runtime/backend/cpu/isa.h, isa_target.h), the wider
// taken where the CPU has it; tests/unit/augment_test.cpp checks the two copies byte for byte.
#pragma once
#include <cstdint>

#include "runtime/backend/cpu/isa.h"
#include "runtime/core/resample.h"

namespace dlb {

struct ResampleLoops {
  // Along each row: `rows` rows of `in` (in_w pixels each, from row `first_row`) into `out`
  // (out_w pixels a row), the taps' columns counted from `in`'s first.
  void (*rows)(const uint8_t* in, int64_t in_w, int64_t first_row, int64_t rows, uint8_t* out,
               int64_t out_w, const ResampleTaps& t);
  // Down each column: `in` (width pixels a row) into out_h rows of `out`.
  void (*columns)(const uint8_t* in, int64_t width, uint8_t* out, int64_t out_h,
                  const ResampleTaps& t);
};

// The copy for `isa` (Unsupported where this CPU cannot run it).
const ResampleLoops& resample_loops(CpuIsa isa);
// The x86-64 copy with the AVX-512 copy's horizontal pass (over the rows' transpose), which no
// caller takes: for tests, which compare the two passes on any host.
const ResampleLoops& resample_loops_transposed_x86_64();

}  // namespace dlb
