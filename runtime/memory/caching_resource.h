// A caching layer over a MemoryResource, as PyTorch's CUDA caching allocator is over cudaMalloc:
// freed blocks are kept by rounded size and handed back to the next request of that size, so the
// training steps after the first call the underlying resource never (cudaMalloc synchronizes the
// device and costs far more than a step's kernels). When the underlying resource fails, every
// cached block is released and the request tried once more. Budgets and categories stay with the
// Allocator above it, which sees requested bytes.
#pragma once
#include <cstddef>
#include <memory>

#include "runtime/memory/allocator.h"

namespace dlb {

// Sizes are rounded up to 512 bytes, and to 2 MiB from 1 MiB up.
size_t caching_block_size(size_t bytes);

// What the cache did, for tests and for the run record.
struct CacheStats {
  size_t upstream_allocations = 0;  // calls that reached the underlying resource
  size_t reuses = 0;                // requests served from the cache
  size_t cached_bytes = 0;          // held now, free, in the cache
  size_t flushes = 0;               // times the cache was released to retry a failed request
};

class CachingMemoryResource final : public MemoryResource {
 public:
  explicit CachingMemoryResource(std::unique_ptr<MemoryResource> upstream);
  ~CachingMemoryResource() override;
  void* allocate(size_t bytes) override;
  void deallocate(void* p, size_t bytes) override;
  std::string_view name() const override { return upstream_->name(); }
  void write(void* dst, const void* src, size_t bytes) override {
    upstream_->write(dst, src, bytes);
  }
  void read(const void* src, void* dst, size_t bytes) override { upstream_->read(src, dst, bytes); }
  void synchronize() override { upstream_->synchronize(); }
  size_t capacity() const override { return upstream_->capacity(); }
  CacheStats stats() const;  // a copy, taken under the lock
  void release_cached();

 private:
  void release_cached_locked();
  struct Impl;
  std::unique_ptr<MemoryResource> upstream_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlb
