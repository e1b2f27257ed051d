// Device memory on one GPU and a compute stream: the half of the CUDA backend that needs no
// kernels but fill. Copies and fills are queued on the stream; a copy to or from pageable host
// memory waits for it, as cudaMemcpy would.
#pragma once
#include <memory>

#include "runtime/backend/backend.h"

namespace dlb::cuda {

// `options.device` is taken modulo the visible devices. Throws Unsupported when none is visible.
std::unique_ptr<DeviceMemory> make_cuda_device_memory(const BackendOptions& options);

}  // namespace dlb::cuda
