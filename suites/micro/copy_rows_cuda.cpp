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

// Seconds of one host-to-device copy of the buffers, the stream drained after it.
double copy_seconds(const CopyBuffers& buf, size_t bytes) {
  const auto t0 = std::chrono::steady_clock::now();
  check(cudaMemcpyAsync(buf.device, buf.host, bytes, cudaMemcpyHostToDevice, buf.stream),
        "cudaMemcpyAsync");
  check(cudaStreamSynchronize(buf.stream), "cudaStreamSynchronize");
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::string register_copy_benchmarks(const std::vector<MachinePeak>&) {
  if (!gpu_available()) return "no CUDA device is visible";
  // The link's measured peak: the best of ten pinned copies of 256 MiB (PCIe or NVLink-C2C,
  // whichever joins this host to the GPU). Host memory is faster than either, so it is not the
  // bound; pageable rows show what staging through the driver's pinned buffer costs.
  constexpr size_t kPeakBytes = size_t{256} << 20;
  double best = 0;
  {
    CopyBuffers buf(kPeakBytes, true);
    copy_seconds(buf, kPeakBytes);
    for (int i = 0; i < 10; ++i) {
      const double t = copy_seconds(buf, kPeakBytes);
      if (best == 0 || t < best) best = t;
    }
  }
  const double peak = static_cast<double>(kPeakBytes) / best;
  benchmark::AddCustomContext("peak cuda h2d bytes_per_s", fmt::format("{:.6g}", peak));
  benchmark::AddCustomContext(
      "peak cuda h2d method",
      "best of 10 pinned host-to-device copies of 256 MiB (cudaMemcpyAsync, "
      "stream synchronised): the link's measured peak");
  for (bool pinned : {true, false}) {
    for (size_t mib : {1, 16, 256}) {
      const size_t bytes = mib << 20;
      const std::string name =
          fmt::format("copy/cuda/{}/{}MiB", pinned ? "pinned" : "pageable", mib);
      benchmark::RegisterBenchmark(
          name.c_str(),
          [=](benchmark::State& state) {
            guarded(state, [&] {
              CopyBuffers buf(bytes, pinned);
              copy_seconds(buf, bytes);
              for (auto _ : state) state.SetIterationTime(copy_seconds(buf, bytes));
              using C = benchmark::Counter;
              state.counters["bytes/s"] =
                  C(static_cast<double>(bytes), C::kIsIterationInvariantRate, C::kIs1000);
              state.counters["of_peak"] =
                  C(static_cast<double>(bytes) / peak, C::kIsIterationInvariantRate);
            });
          })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  return "";
}

}  // namespace dlb::micro
