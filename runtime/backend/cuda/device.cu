#include <fmt/format.h>

#include "runtime/backend/cuda/cuda_check.h"
#include "runtime/backend/cuda/device.h"

namespace dlb::cuda {

void throw_cuda_error(cudaError_t err, const char* stmt, const char* func, const char* file,
                      int line) {
  const std::string msg =
      fmt::format("CUDA error {} ({}) in {} at {}:{}: {}", static_cast<int>(err),
                  cudaGetErrorString(err), func, file, line, stmt);
  if (err == cudaErrorMemoryAllocation) throw OutOfMemory(msg);
  if (is_no_gpu_error(err)) throw Unsupported(msg);
  // A call that a capturing stream does not allow, or a capture it invalidated (900 to 908):
  // the work cannot be captured, which is not a fault of the device.
  if (err >= cudaErrorStreamCaptureUnsupported && err <= cudaErrorStreamCaptureWrongThread) {
    throw Unsupported(msg);
  }
  if (err == cudaErrorInvalidValue || err == cudaErrorInvalidDevicePointer)
    throw InvalidArgument(msg);
  throw DeviceError(msg);
}

bool is_no_gpu_error(cudaError_t err) {
  return err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver;
}

std::vector<DeviceInfo> query_devices() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (is_no_gpu_error(err)) {
    (void)cudaGetLastError();  // clear the sticky "no device" state
    return {};
  }
  DLB_CUDA_CHECK(err);
  std::vector<DeviceInfo> out;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    DLB_CUDA_CHECK(cudaGetDeviceProperties(&p, i));
    out.push_back({i, p.name, p.major, p.minor, p.totalGlobalMem, p.multiProcessorCount});
  }
  return out;
}

int driver_version() {
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess) return 0;
  return v;
}

int runtime_version() {
  int v = 0;
  DLB_CUDA_CHECK(cudaRuntimeGetVersion(&v));
  return v;
}

Stream::Stream() { DLB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
Stream::~Stream() { cudaStreamDestroy(stream_); }
void Stream::synchronize() const { DLB_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

Event::Event(bool timing) {
  DLB_CUDA_CHECK(
      cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}
Event::~Event() { cudaEventDestroy(event_); }
void Event::record(const Stream& s) { DLB_CUDA_CHECK(cudaEventRecord(event_, s.get())); }
void Event::wait_on(const Stream& s) const {
  DLB_CUDA_CHECK(cudaStreamWaitEvent(s.get(), event_, 0));
}
float Event::elapsed_ms_since(const Event& start) const {
  float ms = 0;
  DLB_CUDA_CHECK(cudaEventSynchronize(event_));
  DLB_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

}  // namespace dlb::cuda
