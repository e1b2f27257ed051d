// Checked arithmetic for sizes that come from outside: tensor shapes in files, byte counts, sweep
// sizes. One home, so that every reader refuses a count that does not fit 64 bits with the same
// message instead of wrapping (signed overflow is undefined behaviour; unsigned wraps silently).
#pragma once
#include <cstdint>
#include <string_view>

namespace dlb {

// a * b and a + b, or InvalidArgument("<what>: ... does not fit 64 bits"). Operands must be
// non-negative for the signed forms.
int64_t checked_mul(int64_t a, int64_t b, std::string_view what);
int64_t checked_add(int64_t a, int64_t b, std::string_view what);
uint64_t checked_mul(uint64_t a, uint64_t b, std::string_view what);
uint64_t checked_add(uint64_t a, uint64_t b, std::string_view what);

}  // namespace dlb
