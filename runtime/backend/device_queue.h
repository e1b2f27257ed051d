// What a communicator needs of a GPU, without a device header: a queue (stream) of its own on
// one device, events that mark the work queued on it so far and order other streams after it,
// device timing marks, and where a buffer lives. The CUDA backend implements it
// (backend/cuda/device_queue.cpp); make_device_queue (backend/registry.h) makes one before, or
// without, a Backend: a run's communicator exists before its backend, and `bench allreduce` has
// none. comm/ reaches the device only through this.
#pragma once
#include <memory>

#include "runtime/core/clock.h"
#include "runtime/core/stream_ref.h"

namespace dlb {

// The end of the work queued on a DeviceQueue when the event was recorded.
class DeviceEvent {
 public:
  virtual ~DeviceEvent() = default;
  // Whether that work has finished; throws DeviceError when it failed.
  virtual bool done() const = 0;
  // Whether it has finished or failed, without throwing (a watchdog thread polls it; whoever
  // waits on the event raises the failure).
  virtual bool settled() const noexcept = 0;
  // Work queued on `consumer` from now on starts after that work, without a host wait.
  virtual void order_before(StreamRef consumer) const = 0;
};

class DeviceQueue {
 public:
  virtual ~DeviceQueue() = default;
  virtual int device() const = 0;
  // Its own non-blocking stream: what a library call (NCCL's) is queued on.
  virtual StreamRef stream() const = 0;
  // Makes the queue's device the calling thread's current one, for a thread of the caller's own
  // that only watches (queries events): its calls are allowed while another thread captures a
  // graph (CUDA's thread-local capture mode, as PyTorch's NCCL watchdog sets it), where the
  // default would fail them and invalidate that capture.
  virtual void make_current_for_watching() const = 0;
  // Work queued on this queue from now on starts after the work queued on `producer` so far.
  virtual void wait_for(StreamRef producer) = 0;
  virtual std::shared_ptr<DeviceEvent> record() = 0;
  // A mark of the device's clock (Mark::device), recorded on this queue now: the CUDA backend's
  // EventClock measures it against its own marks.
  virtual Mark timing_mark() = 0;
  // The device that holds `p`; -1 for host memory.
  virtual int device_of(const void* p) const = 0;
};

// GPUs this process sees: 0 without a GPU, a driver, or CUDA in this build (backend/registry.cpp).
int visible_device_count();
// A queue on GPU `device`, which becomes the calling thread's current device. Throws Unsupported
// in a build without CUDA, and DeviceError when the device cannot make one.
std::unique_ptr<DeviceQueue> make_device_queue(int device);

}  // namespace dlb
