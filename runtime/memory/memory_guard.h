// --memory-guard: red zones around every allocation. Each block gets kZoneBytes before and after
// it, filled with a pattern that reads as NaN in f32, f16 and bf16 (a read past a buffer poisons
// what it touches), and a write past a buffer shows when the zones are read back: after each pass
// of the step (the executor asks) and when the block is freed. This sees what sanitizers cannot:
// writes by oneDNN's JIT code, OpenBLAS, cuDNN and our own kernels, on the host or the device.
// Interior zones are ranges inside a block that must stay zero (the gaps between parameters'
// gradients in the flat gradient buffer), so a gradient written one element too far is named.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/memory/allocator.h"

namespace dlb {

class MemoryGuard {
 public:
  // 256 bytes: a block the resource aligned to 256 (cudaMalloc, cuBLASLt's expectation) stays so.
  static constexpr size_t kZoneBytes = 256;

  explicit MemoryGuard(MemoryResource& resource) : resource_(resource) {}
  // Fills the zones around the `bytes` at `user`, which the resource allocated from
  // user - kZoneBytes for bytes + 2 kZoneBytes.
  void arm(void* user, size_t bytes, MemCategory category, std::string_view what);
  // Reads the zones of the block at `user` and forgets them (and its interior zones); damage is
  // kept, to be reported by the next check.
  void disarm(void* user) noexcept;
  void add_interior(void* at, size_t bytes, std::string_view what);
  // What was overwritten, one line per damaged zone (zones of freed blocks first); empty when
  // nothing was.
  std::vector<std::string> damage() const;

 private:
  struct Block {
    size_t bytes;
    MemCategory category;
    std::string what;
  };
  struct Interior {
    size_t bytes;
    std::string what;
  };
  // The first byte of `bytes` at `at` that differs from the pattern (or from zero), or -1.
  int64_t first_changed(const void* at, size_t bytes, bool zeros) const;
  std::string describe(uintptr_t user, const Block& b) const;

  MemoryResource& resource_;
  mutable std::mutex mu_;
  std::map<uintptr_t, Block> blocks_;
  std::map<uintptr_t, Interior> interior_;
  std::vector<std::string> freed_damage_;
};

}  // namespace dlb
