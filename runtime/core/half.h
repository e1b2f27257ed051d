// 16-bit floating-point storage: IEEE 754 binary16 (fp16) and bfloat16 (bf16), as bit patterns.
// From float, both round to nearest with ties to even, as PyTorch's casts and CUDA's
// __float2half_rn / __float2bfloat16_rn do: fp16 overflows to infinity from 65520 up (the tie
// between 65504 and 65536) and keeps subnormals; bf16 keeps float's range. To float, both are
// exact. NaN stays NaN (quiet, with its sign). Integer arithmetic only, so neither the host's nor
// the device's float modes (flush-to-zero, fast math) can change a result. Host and device.
#pragma once
#include <cstdint>
#include <cstring>

#include "runtime/core/dtype.h"
#include "runtime/core/host_device.h"

namespace dlb {

DLB_HD uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}

DLB_HD float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

DLB_HD uint16_t float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
  const uint32_t lsb = (u >> 16) & 1u;
  return static_cast<uint16_t>((u + 0x7fffu + lsb) >> 16);
}

DLB_HD float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

// Rounds the low `shift` bits of `m` away, to nearest with ties to even.
DLB_HD uint32_t round_shift_even(uint32_t m, uint32_t shift) {
  const uint32_t r = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  return r + ((rem > half || (rem == half && (r & 1u))) ? 1u : 0u);
}

DLB_HD uint16_t float_to_f16(float f) {
  const uint32_t u = float_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u, x = u & 0x7fffffffu;
  if (x >= 0x7f800000u) return static_cast<uint16_t>(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: infinity
  if (x >= 0x38800000u) {  // a normal fp16: rebias the exponent (127 -> 15), round 13 bits away
    return static_cast<uint16_t>(sign | round_shift_even(x - 0x38000000u, 13));
  }
  if (x <= 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25: rounds to zero
  // A subnormal fp16, in units of 2^-24: the float's significand m * 2^(e - 150) is
  // m >> (126 - e) units. Rounding up to 0x400 gives the smallest normal, correctly encoded.
  const uint32_t e = x >> 23, m = (x & 0x7fffffu) | 0x800000u;
  return static_cast<uint16_t>(sign | round_shift_even(m, 126u - e));
}

DLB_HD float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return bits_float(sign | 0x7f800000u | (m << 13));  // inf, NaN
  if (e == 0) {
    if (m == 0) return bits_float(sign);
    e = 1;  // subnormal: normalise m * 2^-24 into float's range
    while ((m & 0x400u) == 0) {
      m <<= 1;
      --e;
    }
    m &= 0x3ffu;
  }
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

// Host arrays of `n` values between float and a float storage type (f32: a copy): what goes to
// and comes from a 16-bit tensor through copy_from_host and copy_to_host.
void floats_to_dtype(const float* src, int64_t n, DType to, void* dst);
// What storing x in a float type keeps (to nearest even), as a float.
float stored_value(float x, DType t);
void dtype_to_floats(const void* src, int64_t n, DType from, float* dst);

}  // namespace dlb
