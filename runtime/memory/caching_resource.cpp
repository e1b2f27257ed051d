#include "runtime/memory/caching_resource.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "runtime/core/error.h"

namespace dlb {

size_t caching_block_size(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = size_t{2} << 20, kLargeFrom = size_t{1} << 20;
  if (bytes == 0) bytes = 1;
  const size_t unit = bytes >= kLargeFrom ? kLarge : kSmall;
  return (bytes + unit - 1) / unit * unit;
}

struct CachingMemoryResource::Impl {
  std::mutex mu;
  std::map<size_t, std::vector<void*>> free_blocks;  // by block size
  std::unordered_map<void*, size_t> live;            // handed out: block size
  CacheStats stats;
};

CachingMemoryResource::CachingMemoryResource(std::unique_ptr<MemoryResource> upstream)
    : upstream_(std::move(upstream)), impl_(std::make_unique<Impl>()) {}

CachingMemoryResource::~CachingMemoryResource() { release_cached(); }

CacheStats CachingMemoryResource::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

void* CachingMemoryResource::allocate(size_t bytes) {
  const size_t block = caching_block_size(bytes);
  std::lock_guard<std::mutex> lock(impl_->mu);
  CacheStats& st = impl_->stats;
  auto it = impl_->free_blocks.find(block);
  void* p = nullptr;
  if (it != impl_->free_blocks.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    ++st.reuses;
    st.cached_bytes -= block;
  } else {
    ++st.upstream_allocations;
    p = upstream_->allocate(block);
    if (!p && st.cached_bytes > 0) {
      release_cached_locked();
      ++st.flushes;
      p = upstream_->allocate(block);
    }
  }
  if (p) impl_->live.emplace(p, block);
  return p;
}

void CachingMemoryResource::deallocate(void* p, size_t bytes) {
  const size_t block = caching_block_size(bytes);
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->live.find(p);
  if (it == impl_->live.end() || it->second != block) {
    // A pointer not handed out, or freed twice: caching it would hand it out twice. This runs
    // in destructors (Buffer's), so it cannot throw: say so and stop.
    fmt::print(stderr, "dlbench: {}: freeing {} bytes at {} that it did not hand out\n",
               upstream_->name(), bytes, p);
    std::abort();
  }
  impl_->live.erase(it);
  impl_->free_blocks[block].push_back(p);
  impl_->stats.cached_bytes += block;
}

void CachingMemoryResource::release_cached() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  release_cached_locked();
}

void CachingMemoryResource::release_cached_locked() {
  for (auto& [block, ptrs] : impl_->free_blocks) {
    for (void* p : ptrs) upstream_->deallocate(p, block);
  }
  impl_->free_blocks.clear();
  impl_->stats.cached_bytes = 0;
}

}  // namespace dlb
