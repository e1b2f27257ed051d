#include "runtime/memory/caching_resource.h"

#include <map>
#include <mutex>
#include <vector>

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
};

CachingMemoryResource::CachingMemoryResource(std::unique_ptr<MemoryResource> upstream)
    : upstream_(std::move(upstream)), impl_(std::make_unique<Impl>()) {}

CachingMemoryResource::~CachingMemoryResource() { release_cached(); }

void* CachingMemoryResource::allocate(size_t bytes) {
  const size_t block = caching_block_size(bytes);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = impl_->free_blocks.find(block);
    if (it != impl_->free_blocks.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      ++stats_.reuses;
      stats_.cached_bytes -= block;
      return p;
    }
  }
  ++stats_.upstream_allocations;
  if (void* p = upstream_->allocate(block)) return p;
  if (stats_.cached_bytes == 0) return nullptr;
  release_cached();
  ++stats_.flushes;
  return upstream_->allocate(block);
}

void CachingMemoryResource::deallocate(void* p, size_t bytes) {
  const size_t block = caching_block_size(bytes);
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->free_blocks[block].push_back(p);
  stats_.cached_bytes += block;
}

void CachingMemoryResource::release_cached() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (auto& [block, ptrs] : impl_->free_blocks) {
    for (void* p : ptrs) upstream_->deallocate(p, block);
  }
  impl_->free_blocks.clear();
  stats_.cached_bytes = 0;
}

}  // namespace dlb
