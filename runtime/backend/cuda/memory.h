// Device and pinned-host memory resources, so CUDA allocations go through the Allocator and
// count against the same budget and categories as the CPU's.
#pragma once
#include <memory>

#include "runtime/memory/allocator.h"

namespace dlb::cuda {

std::unique_ptr<MemoryResource> make_device_memory_resource(int device);
std::unique_ptr<MemoryResource> make_pinned_host_memory_resource();

}  // namespace dlb::cuda
