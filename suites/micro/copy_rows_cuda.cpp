// CUDA builds: host-to-device copies from pinned (cudaMallocHost) and pageable (malloc) host
// memory, at a few sizes, each on its own stream (micro.h). A pageable copy is staged through
// the driver's pinned buffer, which is what pinning saves.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "runtime/core/error.h"
#include "suites/micro/micro.h"

namespace dlb::micro {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    throw DeviceError(fmt::format("{} failed: {}", what, cudaGetErrorString(e)));
  }
}

// Host and device buffers of `bytes`, and a stream; each freed by its own owner, so a failure
// part-way through the constructor frees what was made.
class CopyBuffers {
 public:
  CopyBuffers(size_t bytes, bool pinned) {
    if (pinned) {
      void* p = nullptr;
      check(cudaMallocHost(&p, bytes), "cudaMallocHost");
      host_ = {p, [](void* q) { cudaFreeHost(q); }};
    } else {
      host_ = {std::malloc(bytes), [](void* q) { std::free(q); }};
      if (!host_) throw OutOfMemory(fmt::format("malloc of {} bytes failed", bytes));
    }
    std::memset(host_.get(), 1, bytes);  // touched: the pages exist before the timing
    void* d = nullptr;
    check(cudaMalloc(&d, bytes), "cudaMalloc");
    device_ = {d, [](void* q) { cudaFree(q); }};
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    stream_ = {s, [](cudaStream_t q) { cudaStreamDestroy(q); }};
  }

  // Seconds of one host-to-device copy of `bytes`, the stream drained after it.
  double copy_seconds(size_t bytes) const {
    const auto t0 = std::chrono::steady_clock::now();
    check(cudaMemcpyAsync(device_.get(), host_.get(), bytes, cudaMemcpyHostToDevice, stream_.get()),
          "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream_.get()), "cudaStreamSynchronize");
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

 private:
  std::unique_ptr<void, void (*)(void*)> host_{nullptr, [](void*) {}};
  std::unique_ptr<void, void (*)(void*)> device_{nullptr, [](void*) {}};
  std::unique_ptr<CUstream_st, void (*)(cudaStream_t)> stream_{nullptr, [](cudaStream_t) {}};
};

// The link's measured peak (PCIe or NVLink-C2C, whichever joins this host to the GPU): the best
// of ten pinned copies of 256 MiB, measured by the first copy row that runs and kept. Host
// memory is faster than either link, so it is not the bound.
double link_peak_bytes_per_s() {
  static double peak = 0;
  if (peak > 0) return peak;
  constexpr size_t kBytes = size_t{256} << 20;
  CopyBuffers buf(kBytes, true);
  double best = buf.copy_seconds(kBytes);
  for (int i = 0; i < 10; ++i) best = std::min(best, buf.copy_seconds(kBytes));
  return peak = static_cast<double>(kBytes) / best;
}

}  // namespace

std::string register_copy_benchmarks(const std::vector<MachinePeak>&) {
  if (!gpu_available()) return "no CUDA device is visible";
  for (bool pinned : {true, false}) {
    for (size_t mib : {1, 16, 256}) {
      const size_t bytes = mib << 20;
      const std::string name =
          fmt::format("copy/cuda/{}/{}MiB", pinned ? "pinned" : "pageable", mib);
      benchmark::RegisterBenchmark(
          name.c_str(),
          [=](benchmark::State& state) {
            guarded(state, [&] {
              const double peak = link_peak_bytes_per_s();
              CopyBuffers buf(bytes, pinned);
              buf.copy_seconds(bytes);
              for (auto _ : state) state.SetIterationTime(buf.copy_seconds(bytes));
              using C = benchmark::Counter;
              state.counters["bytes/s"] =
                  C(static_cast<double>(bytes), C::kIsIterationInvariantRate, C::kIs1000);
              state.counters["of_peak"] =
                  C(static_cast<double>(bytes) / peak, C::kIsIterationInvariantRate);
              state.counters["link_peak_bytes_per_s"] = peak;
            });
          })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  return "";
}

}  // namespace dlb::micro
