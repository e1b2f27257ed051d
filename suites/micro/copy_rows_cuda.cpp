// CUDA builds: host-to-device copies from pinned (cudaMallocHost) and pageable (malloc) host
// memory, at a few sizes, each on its own stream (micro.h). A pageable copy is staged through
// the driver's pinned buffer, which is what pinning saves.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "runtime/core/error.h"
#include "suites/micro/micro.h"

namespace dlb::micro {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    throw DeviceError(fmt::format("{} failed: {}", what, cudaGetErrorString(e)));
  }
}

// Host and device buffers of `bytes`, and a stream; freed when the row ends.
struct CopyBuffers {
  void* host = nullptr;
  void* device = nullptr;
  cudaStream_t stream = nullptr;
  bool pinned;
  CopyBuffers(size_t bytes, bool pin) : pinned(pin) {
    if (pinned) {
      check(cudaMallocHost(&host, bytes), "cudaMallocHost");
    } else {
      host = std::malloc(bytes);
      if (!host) throw OutOfMemory(fmt::format("malloc of {} bytes failed", bytes));
    }
    std::memset(host, 1, bytes);  // touched: the pages exist before the timing
    check(cudaMalloc(&device, bytes), "cudaMalloc");
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~CopyBuffers() {
    if (stream) cudaStreamDestroy(stream);
    if (device) cudaFree(device);
    if (pinned) {
      cudaFreeHost(host);
    } else {
      std::free(host);
    }
  }
};

}  // namespace

std::string register_copy_benchmarks(const std::vector<MachinePeak>& peaks) {
  if (!gpu_available()) return "no CUDA device is visible";
  // A copy reads host memory: its bound here is the host's measured STREAM bandwidth.
  const auto host = find_peak(peaks, host_name(), device_name(*make_backend(BackendKind::kCpu, {})),
                              "cpu", "fp32");
  if (!host) return "no host memory bandwidth measured (dlbench bench peak)";
  const double peak = host->bytes_per_s;
  for (bool pinned : {true, false}) {
    for (size_t mib : {1, 16, 256}) {
      const size_t bytes = mib << 20;
      const std::string name =
          fmt::format("copy/cuda/{}/{}MiB", pinned ? "pinned" : "pageable", mib);
      benchmark::RegisterBenchmark(
          name.c_str(),
          [=](benchmark::State& state) {
            CopyBuffers buf(bytes, pinned);
            auto copy = [&] {
              check(
                  cudaMemcpyAsync(buf.device, buf.host, bytes, cudaMemcpyHostToDevice, buf.stream),
                  "cudaMemcpyAsync");
              check(cudaStreamSynchronize(buf.stream), "cudaStreamSynchronize");
            };
            copy();
            for (auto _ : state) {
              const auto t0 = std::chrono::steady_clock::now();
              copy();
              state.SetIterationTime(
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
            }
            using C = benchmark::Counter;
            state.counters["bytes/s"] =
                C(static_cast<double>(bytes), C::kIsIterationInvariantRate, C::kIs1000);
            state.counters["of_peak"] =
                C(static_cast<double>(bytes) / peak, C::kIsIterationInvariantRate);
          })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  return "";
}

}  // namespace dlb::micro
