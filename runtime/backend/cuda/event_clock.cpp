#include "runtime/backend/cuda/event_clock.h"

#include "runtime/backend/cuda/cuda_check.h"
#include "runtime/core/error.h"

namespace dlb::cuda {

Mark EventClock::mark() const {
  cudaEvent_t e = nullptr;
  DLB_CUDA_CHECK(cudaEventCreate(&e));  // with timing: blocking-sync off, timing on
  std::shared_ptr<void> owned(e, [](void* p) { cudaEventDestroy(static_cast<cudaEvent_t>(p)); });
  DLB_CUDA_CHECK(cudaEventRecord(e, stream_));
  return Mark{host_.now_us(), owned};
}

double EventClock::elapsed_us(const Mark& a, const Mark& b) const {
  if (!a.device || !b.device) {
    throw InvalidArgument("EventClock: elapsed time between marks of another clock");
  }
  auto* ea = static_cast<cudaEvent_t>(a.device.get());
  auto* eb = static_cast<cudaEvent_t>(b.device.get());
  DLB_CUDA_CHECK(cudaEventSynchronize(ea));  // may be on another stream, not yet reached
  DLB_CUDA_CHECK(cudaEventSynchronize(eb));
  float ms = 0;
  DLB_CUDA_CHECK(cudaEventElapsedTime(&ms, ea, eb));
  return static_cast<double>(ms) * 1e3;
}

}  // namespace dlb::cuda
