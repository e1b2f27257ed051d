#include <cuda_runtime.h>

#include "runtime/backend/cuda/cuda_check.h"
#include "runtime/backend/cuda/memory.h"
#include "runtime/memory/caching_resource.h"

namespace dlb::cuda {
namespace {

class DeviceMemoryResource final : public MemoryResource {
 public:
  explicit DeviceMemoryResource(int device) : device_(device) {}
  void* allocate(size_t bytes) override {
    DLB_CUDA_CHECK(cudaSetDevice(device_));
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;  // the Allocator turns this into OutOfMemory
    }
    DLB_CUDA_CHECK(err);
    return p;
  }
  void deallocate(void* p, size_t) override { cudaFree(p); }
  std::string_view name() const override { return "CUDA device memory"; }
  // The guard zones (memory_guard.h): synchronous copies, once synchronize() has waited for all
  // work queued on the device (every stream: the backend's are non-blocking, and cudaMemcpy on
  // the legacy stream would not wait for them).
  void write(void* dst, const void* src, size_t bytes) override {
    DLB_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  }
  void read(const void* src, void* dst, size_t bytes) override {
    DLB_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  }
  void synchronize() override { DLB_CUDA_CHECK(cudaDeviceSynchronize()); }
  size_t capacity() const override {
    DLB_CUDA_CHECK(cudaSetDevice(device_));
    size_t free = 0, total = 0;
    DLB_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    return total;
  }

 private:
  int device_;
};

class PinnedHostMemoryResource final : public MemoryResource {
 public:
  void* allocate(size_t bytes) override {
    void* p = nullptr;
    if (cudaMallocHost(&p, bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return p;
  }
  void deallocate(void* p, size_t) override { cudaFreeHost(p); }
  std::string_view name() const override { return "pinned host memory"; }
};

}  // namespace

std::unique_ptr<MemoryResource> make_device_memory_resource(int device) {
  return std::make_unique<DeviceMemoryResource>(device);
}
std::unique_ptr<MemoryResource> make_caching_device_memory_resource(int device) {
  return std::make_unique<CachingMemoryResource>(make_device_memory_resource(device));
}
std::unique_ptr<MemoryResource> make_pinned_host_memory_resource() {
  return std::make_unique<PinnedHostMemoryResource>();
}

}  // namespace dlb::cuda
