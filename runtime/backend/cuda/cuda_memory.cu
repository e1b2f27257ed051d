#include <fmt/format.h>

#include "runtime/backend/cuda/cuda_check.h"
#include "runtime/backend/cuda/cuda_memory.h"
#include "runtime/backend/cuda/device.h"
#include "runtime/backend/cuda/memory.h"

namespace dlb::cuda {
namespace {

__global__ void fill_f32(float* p, int64_t n, float value) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    p[i] = value;
  }
}

class CudaDeviceMemory final : public DeviceMemory {
 public:
  CudaDeviceMemory(const DeviceInfo& device, const BackendOptions& options)
      : DeviceMemory(std::make_shared<Allocator>(make_device_memory_resource(device.index),
                                                 options.memory_budget)),
        device_(device) {
    DLB_CUDA_CHECK(cudaSetDevice(device_.index));
    stream_ = std::make_unique<Stream>();
  }
  std::string_view name() const override { return "cuda"; }
  std::map<std::string, std::string> environment() const override {
    return {{"device", device_.name},
            {"device_index", std::to_string(device_.index)},
            {"compute_capability", fmt::format("{}.{}", device_.sm_major, device_.sm_minor)}};
  }
  void copy_from_host(const void* src, Tensor& dst) override {
    DLB_CUDA_CHECK(
        cudaMemcpyAsync(dst.raw(), src, dst.bytes(), cudaMemcpyHostToDevice, stream_->get()));
    stream_->synchronize();  // `src` may be pageable and reused as soon as this returns
  }
  void copy_to_host(const Tensor& src, void* dst) override {
    DLB_CUDA_CHECK(
        cudaMemcpyAsync(dst, src.raw(), src.bytes(), cudaMemcpyDeviceToHost, stream_->get()));
    stream_->synchronize();
  }
  void copy(const Tensor& src, Tensor& dst) override {
    if (src.bytes() != dst.bytes()) {
      throw InvalidArgument(fmt::format("copy: {} bytes into {} bytes", src.bytes(), dst.bytes()));
    }
    DLB_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.bytes(), cudaMemcpyDeviceToDevice,
                                   stream_->get()));
  }
  void fill(Tensor& t, float value) override {
    if (t.dtype() != DType::kF32) throw InvalidArgument("fill takes f32 tensors");
    const int64_t n = t.numel();
    if (n == 0) return;
    const int threads = 256;
    const int blocks = static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 4096));
    fill_f32<<<blocks, threads, 0, stream_->get()>>>(t.data<float>(), n, value);
    DLB_CUDA_CHECK(cudaGetLastError());
  }
  void synchronize() override { stream_->synchronize(); }
  StreamRef stream() const override { return {stream_->get()}; }

 private:
  DeviceInfo device_;
  std::unique_ptr<Stream> stream_;
};

}  // namespace

std::unique_ptr<DeviceMemory> make_cuda_device_memory(const BackendOptions& options) {
  const auto devices = query_devices();
  if (devices.empty()) throw Unsupported("cuda: no CUDA device is visible on this machine");
  const int index = options.device % static_cast<int>(devices.size());
  return std::make_unique<CudaDeviceMemory>(devices[index], options);
}

}  // namespace dlb::cuda
