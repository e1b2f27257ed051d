// Device and pinned-host memory resources, so CUDA allocations go through the Allocator and
// count against the same budget and categories as the CPU's.
#pragma once
#include <memory>

#include "runtime/memory/allocator.h"

namespace dlb::cuda {

std::unique_ptr<MemoryResource> make_device_memory_resource(int device);
std::unique_ptr<MemoryResource> make_pinned_host_memory_resource();
// Device memory behind a cache (runtime/memory/caching_resource.h): no cudaMalloc once the
// first training step has run.
std::unique_ptr<MemoryResource> make_caching_device_memory_resource(int device);

}  // namespace dlb::cuda
