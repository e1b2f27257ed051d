// The CUDA backend's clock: marks are CUDA events recorded on the compute stream, so the time
// between two marks is the device's, not the host's (which runs ahead of the device by however
// much work it has queued). now_us() and from_steady() stay on the host's steady clock.
#pragma once
#include <cuda_runtime.h>

#include "runtime/core/clock.h"

namespace dlb::cuda {

class EventClock final : public Clock {
 public:
  explicit EventClock(cudaStream_t stream) : stream_(stream) {}
  double now_us() const override { return host_.now_us(); }
  double from_steady(std::chrono::steady_clock::time_point t) const override {
    return host_.from_steady(t);
  }
  // Records a timing event on the stream; returns at once.
  Mark mark() const override;
  // cudaEventElapsedTime between the two events, after waiting for both (about 0.5 us
  // resolution).
  double elapsed_us(const Mark& a, const Mark& b) const override;

 private:
  cudaStream_t stream_;
  SteadyClock host_;
};

}  // namespace dlb::cuda
