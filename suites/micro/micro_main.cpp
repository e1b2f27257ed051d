// dlbench_micro: Google Benchmark's runner over dlbench's micro-benchmarks (micro.h) and the
// statically registered ones (trace_bench, batch_norm_bench). Before registering, it finds the
// machine's peak for each backend with a device here in the peak file, measuring and keeping it
// when it is missing, and puts it in the JSON's context.
//   build/suites/dlbench_micro [--benchmark_filter=REGEX] [--benchmark_out=F.json ...]
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "suites/micro/micro.h"

namespace {

using dlb::BackendKind;
using dlb::MachinePeak;

// The peak of each backend here at each precision its rows use: from the peak file, or measured
// now and kept there.
std::vector<MachinePeak> machine_peaks(const std::vector<BackendKind>& kinds) {
  const std::string path = dlb::peak_file_path();
  std::vector<MachinePeak> peaks = dlb::read_peaks(path);
  for (BackendKind kind : kinds) {
    auto backend = dlb::make_backend(kind, {});
    // The CPU's 16-bit precisions without a peak of their own compute in f32.
    const std::vector<dlb::Precision> wanted = kind == BackendKind::kCpu
                                                   ? dlb::cpu_peak_precisions(*backend)
                                                   : dlb::micro::micro_precisions(kind);
    for (dlb::Precision p : wanted) {
      const std::string name(dlb::precision_name(p));
      const auto found = dlb::find_peak(peaks, dlb::host_name(), dlb::device_name(*backend),
                                        std::string(backend->name()), name);
      if (found && found->precision == name) continue;
      fmt::print(stderr, "dlbench_micro: measuring the {} peak at {} (kept in {})\n",
                 backend->name(), name, path);
      const MachinePeak peak = dlb::measure_peak(*backend, p);
      dlb::save_peak(path, peak);
      peaks.push_back(peak);
    }
  }
  return peaks;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  try {
    std::vector<BackendKind> kinds = {BackendKind::kCpu};
    if (dlb::gpu_available()) kinds.push_back(BackendKind::kCuda);
    const std::vector<MachinePeak> peaks = machine_peaks(kinds);
    for (const MachinePeak& p : peaks) {
      if (p.host != dlb::host_name()) continue;
      const std::string key = fmt::format("peak {} {}", p.backend, p.precision);
      benchmark::AddCustomContext(key + " flops_per_s", fmt::format("{:.6g}", p.flops_per_s));
      benchmark::AddCustomContext(key + " bytes_per_s", fmt::format("{:.6g}", p.bytes_per_s));
      benchmark::AddCustomContext(
          key + " method", fmt::format("{}; {}; measured {} on {}", p.flops_method, p.bytes_method,
                                       p.measured_at, p.device));
    }
    for (BackendKind kind : kinds) {
      dlb::micro::register_gemm_benchmarks(kind, peaks);
      dlb::micro::register_conv_benchmarks(kind, peaks);
    }
    const std::string no_copies = dlb::micro::register_copy_benchmarks(peaks);
    benchmark::AddCustomContext("gpu rows",
                                no_copies.empty() ? "registered" : "skipped: " + no_copies);
    if (!no_copies.empty()) fmt::print(stderr, "dlbench_micro: GPU rows skipped: {}\n", no_copies);
  } catch (const std::exception& e) {
    fmt::print(stderr, "dlbench_micro: {}\n", e.what());
    return 2;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
