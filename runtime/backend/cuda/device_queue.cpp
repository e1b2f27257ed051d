#include "runtime/backend/cuda/device_queue.h"

#include <cuda_runtime.h>

#include "runtime/backend/cuda/cuda_check.h"

namespace dlb::cuda {
namespace {

class CudaDeviceEvent final : public DeviceEvent {
 public:
  explicit CudaDeviceEvent(cudaStream_t stream) {
    DLB_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    DLB_CUDA_CHECK(cudaEventRecord(event_, stream));
  }
  ~CudaDeviceEvent() override { cudaEventDestroy(event_); }
  CudaDeviceEvent(const CudaDeviceEvent&) = delete;
  CudaDeviceEvent& operator=(const CudaDeviceEvent&) = delete;

  bool done() const override {
    const cudaError_t state = cudaEventQuery(event_);
    if (state == cudaErrorNotReady) return false;
    DLB_CUDA_CHECK(state);  // a failed kernel is an error, not work still running
    return true;
  }
  bool settled() const noexcept override { return cudaEventQuery(event_) != cudaErrorNotReady; }
  void order_before(StreamRef consumer) const override {
    DLB_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(consumer.native), event_, 0));
  }

 private:
  cudaEvent_t event_ = nullptr;
};

class CudaDeviceQueue final : public DeviceQueue {
 public:
  explicit CudaDeviceQueue(int device) : device_(device) {
    DLB_CUDA_CHECK(cudaSetDevice(device));
    DLB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    DLB_CUDA_CHECK(cudaEventCreateWithFlags(&producer_done_, cudaEventDisableTiming));
  }
  ~CudaDeviceQueue() override {
    if (producer_done_) cudaEventDestroy(producer_done_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  CudaDeviceQueue(const CudaDeviceQueue&) = delete;
  CudaDeviceQueue& operator=(const CudaDeviceQueue&) = delete;

  int device() const override { return device_; }
  StreamRef stream() const override { return StreamRef{stream_}; }
  void make_current_for_watching() const override {
    DLB_CUDA_CHECK(cudaSetDevice(device_));
    cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal;
    DLB_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  }
  // One event, reused: a stream wait captures the event's state when it is issued.
  void wait_for(StreamRef producer) override {
    if (!producer.on_device()) return;
    DLB_CUDA_CHECK(cudaEventRecord(producer_done_, static_cast<cudaStream_t>(producer.native)));
    DLB_CUDA_CHECK(cudaStreamWaitEvent(stream_, producer_done_, 0));
  }
  std::shared_ptr<DeviceEvent> record() override {
    return std::make_shared<CudaDeviceEvent>(stream_);
  }
  // A timing event, as the CUDA backend's EventClock records its own (one device, any stream).
  Mark timing_mark() override {
    cudaEvent_t e = nullptr;
    DLB_CUDA_CHECK(cudaEventCreate(&e));
    std::shared_ptr<void> owned(e, [](void* p) { cudaEventDestroy(static_cast<cudaEvent_t>(p)); });
    DLB_CUDA_CHECK(cudaEventRecord(e, stream_));
    return Mark{0, std::move(owned)};
  }
  int device_of(const void* p) const override {
    cudaPointerAttributes attr{};
    DLB_CUDA_CHECK(cudaPointerGetAttributes(&attr, p));
    if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) return -1;
    return attr.device;
  }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t producer_done_ = nullptr;
};

}  // namespace

std::unique_ptr<DeviceQueue> make_cuda_device_queue(int device) {
  return std::make_unique<CudaDeviceQueue>(device);
}

}  // namespace dlb::cuda
