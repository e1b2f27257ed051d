// 16-bit conversions (runtime/core/half.h) against the formats' definitions: every fp16 and bf16
// value converts to float and back unchanged; the float halfway between two neighbours rounds to
// the one with the even significand, and a float either side of it to the nearer one; fp16's
// overflow and underflow thresholds. Where the compiler has IEEE binary16 (_Float16, correctly
// rounded by libgcc), a million random floats convert to the same bits as its casts.
#include "runtime/core/half.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

namespace dlb {
namespace {

float next_up(float f) { return std::nextafter(f, INFINITY); }
float next_down(float f) { return std::nextafter(f, -INFINITY); }

TEST(Half, EveryFp16ValueRoundTripsThroughFloat) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = f16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(f)))) << std::hex << h;
      continue;
    }
    ASSERT_EQ(float_to_f16(f), h) << std::hex << h << " -> " << f;
  }
}

TEST(Half, Fp16HalfwayRoundsToEvenAndNeighboursToTheNearer) {
  for (uint32_t h = 0; h < 0x7bffu; ++h) {  // every pair of neighbours up to the largest finite
    const float a = f16_to_float(static_cast<uint16_t>(h)),
                b = f16_to_float(static_cast<uint16_t>(h + 1));
    const float mid = a + (b - a) / 2;  // exact: float has 13 more significand bits
    const uint16_t even = (h & 1u) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h);
    ASSERT_EQ(float_to_f16(mid), even) << std::hex << h;
    ASSERT_EQ(float_to_f16(next_down(mid)), h) << std::hex << h;
    ASSERT_EQ(float_to_f16(next_up(mid)), h + 1) << std::hex << h;
    ASSERT_EQ(float_to_f16(-mid), even | 0x8000u) << std::hex << h;
  }
}

TEST(Half, Fp16Thresholds) {
  EXPECT_EQ(f16_to_float(0x3c00), 1.f);
  EXPECT_EQ(f16_to_float(0x7bff), 65504.f);
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.f, -24));  // the smallest subnormal
  EXPECT_EQ(f16_to_float(0x0400), std::ldexp(1.f, -14));  // the smallest normal
  EXPECT_TRUE(std::signbit(f16_to_float(0x8000)));
  EXPECT_EQ(float_to_f16(next_down(65520.f)), 0x7bff);
  EXPECT_EQ(float_to_f16(65520.f), 0x7c00);  // halfway to 65536: even is the infinity
  EXPECT_EQ(float_to_f16(FLT_MAX), 0x7c00);
  EXPECT_EQ(float_to_f16(-INFINITY), 0xfc00);
  EXPECT_EQ(float_to_f16(std::ldexp(1.f, -25)), 0x0000);  // halfway to 2^-24: even is zero
  EXPECT_EQ(float_to_f16(next_up(std::ldexp(1.f, -25))), 0x0001);
  EXPECT_EQ(float_to_f16(FLT_MIN), 0x0000);
  EXPECT_EQ(float_to_f16(-0.f), 0x8000);
  EXPECT_EQ(float_to_f16(NAN) & 0x7e00, 0x7e00);
}

TEST(Half, EveryBf16ValueRoundTripsAndHalfwayRoundsToEven) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = bf16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(f))));
      continue;
    }
    ASSERT_EQ(float_to_bf16(f), h) << std::hex << h;
    if ((h & 0x7fffu) >= 0x7f7fu) continue;  // no finite neighbour above
    const float b = bf16_to_float(static_cast<uint16_t>(h + 1));
    const float mid =  // same sign and binade: the mean of the bit patterns
        bits_float(static_cast<uint32_t>((uint64_t{float_bits(f)} + float_bits(b)) / 2));
    const uint16_t even = (h & 1u) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h);
    ASSERT_EQ(float_to_bf16(mid), even) << std::hex << h;
    ASSERT_EQ(float_to_bf16(bits_float(float_bits(mid) - 1)), h) << std::hex << h;
    ASSERT_EQ(float_to_bf16(bits_float(float_bits(mid) + 1)), h + 1) << std::hex << h;
  }
  EXPECT_EQ(float_to_bf16(FLT_MAX), 0x7f80);  // past the largest bf16's halfway point
  EXPECT_EQ(float_to_bf16(1.f), 0x3f80);
}

#ifdef __FLT16_MAX__
TEST(Half, Fp16MatchesTheCompilersBinary16) {
  std::mt19937 gen(7);
  for (int i = 0; i < 1000000; ++i) {
    uint32_t u = static_cast<uint32_t>(gen());
    // Every other one with an exponent in and around fp16's range (2^-30 to 2^17).
    if (i % 2) u = (u & 0x807fffffu) | ((97u + static_cast<uint32_t>(gen()) % 48u) << 23);
    const float f = bits_float(u);
    if (std::isnan(f)) continue;
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t bits;
    std::memcpy(&bits, &h, sizeof(bits));
    ASSERT_EQ(float_to_f16(f), bits) << f;
    ASSERT_EQ(f16_to_float(bits), static_cast<float>(h)) << f;
  }
}
#endif

}  // namespace
}  // namespace dlb
