// A counter-based random stream: the value at index i depends only on (seed, i), so any number of
// threads, on any device, draw the same numbers in any order. Dropout masks come from it on every
// backend, so the CPU and CUDA backends drop the same elements for the same seed.
#pragma once
#include <cstdint>

#include "runtime/core/host_device.h"

namespace dlb {

// SplitMix64's finaliser (Steele, Lea and Flood 2014): a bijection of 64-bit words whose output
// bits each depend on every input bit.
DLB_HD uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) with 24 random bits (every float of that grid is exact), at index i of the
// stream `seed`.
DLB_HD float counter_uniform(uint64_t seed, uint64_t i) {
  const uint64_t h = splitmix64(splitmix64(seed) ^ i);
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

}  // namespace dlb
