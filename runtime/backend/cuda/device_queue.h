// The CUDA implementation of DeviceQueue (backend/device_queue.h): a non-blocking stream on one
// GPU, and its events. Only the registry includes this.
#pragma once
#include <memory>

#include "runtime/backend/device_queue.h"

namespace dlb::cuda {

std::unique_ptr<DeviceQueue> make_cuda_device_queue(int device);

}  // namespace dlb::cuda
