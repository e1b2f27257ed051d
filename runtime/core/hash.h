// FNV-1a, 64-bit: a fixed, dependency-free hash for identifiers and checksums that must agree
// across processes and runs (point ids, weight checksums across ranks).
#pragma once
#include <cstddef>
#include <cstdint>

namespace dlb {

constexpr uint64_t kFnv1aOffset = 1469598103934665603ull;

// Continue a hash over more bytes by passing the previous value as `h`.
inline uint64_t fnv1a(const void* data, size_t bytes, uint64_t h = kFnv1aOffset) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace dlb
