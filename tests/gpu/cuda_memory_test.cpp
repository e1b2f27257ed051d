// CUDA device memory (runtime/backend/cuda/cuda_memory.cu) on a real GPU: fills, copies both ways
// and on the device, the allocator's accounting and budget, and the device index. Without a
// visible GPU the program exits 77, which ctest reports as skipped.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/core/error.h"
#include "tests/gpu/skip_without_gpu.h"

namespace dlb {
namespace {

std::unique_ptr<DeviceMemory> gpu(BackendOptions o = {}) {
  return make_device_memory(BackendKind::kCuda, o);
}

TEST(CudaMemory, FillThenCopyToHost) {
  auto m = gpu();
  const int64_t n = (1 << 20) + 3;  // more than the fill kernel's grid covers in one pass
  Tensor t = m->empty({n}, DType::kF32, MemCategory::kActivations, "t");
  m->fill(t, 2.5f);
  std::vector<float> host(n, 0.f);
  m->copy_to_host(t, host.data());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(host[i], 2.5f) << i;
}

TEST(CudaMemory, CopiesBothWaysAndOnTheDevice) {
  auto m = gpu();
  std::vector<float> pattern(4099);
  std::iota(pattern.begin(), pattern.end(), -7.f);
  Tensor a = m->empty({4099}, DType::kF32, MemCategory::kActivations, "a");
  Tensor b = m->empty({4099}, DType::kF32, MemCategory::kActivations, "b");
  m->copy_from_host(pattern.data(), a);
  m->copy(a, b);
  std::vector<float> back(4099, 0.f);
  m->copy_to_host(b, back.data());
  EXPECT_EQ(back, pattern);
  Tensor small = m->empty({3}, DType::kF32, MemCategory::kActivations, "small");
  EXPECT_THROW(m->copy(a, small), InvalidArgument);
}

TEST(CudaMemory, AllocationsCountAndTheBudgetHolds) {
  BackendOptions o;
  o.memory_budget = 1 << 20;
  auto m = gpu(o);
  {
    Tensor t = m->empty({1 << 17}, DType::kF32, MemCategory::kComm, "half a MiB");
    EXPECT_EQ(m->allocator().stats().current[static_cast<size_t>(MemCategory::kComm)], 1u << 19);
    EXPECT_THROW(m->empty({1 << 18}, DType::kF32, MemCategory::kComm, "one MiB more"), OutOfMemory);
  }
  EXPECT_EQ(m->allocator().stats().current[static_cast<size_t>(MemCategory::kComm)], 0u);
}

TEST(CudaMemory, HasADeviceStreamAndWrapsTheDeviceIndex) {
  auto first = gpu();
  EXPECT_TRUE(first->stream().on_device());
  EXPECT_EQ(first->environment().at("device_index"), "0");
  BackendOptions o;
  o.device = static_cast<int>(list_devices().size()) -
             1;  // the device count: the cpu line, then one per GPU
  EXPECT_EQ(gpu(o)->environment().at("device_index"), "0");
}

}  // namespace
}  // namespace dlb

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (dlb::skip_without_gpu()) return dlb::kSkippedExitCode;
  return RUN_ALL_TESTS();
}
