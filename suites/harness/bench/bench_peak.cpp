#include <fmt/format.h>

#include "suites/harness/bench/bench_commands.h"
#include "suites/harness/core/machine_peak.h"

namespace dlb {

int bench_peak_command() {
  const std::string path = peak_file_path();
  read_peaks(path);  // a file that is not a peak file is refused before a second is spent
  std::vector<std::pair<BackendKind, Precision>> wanted;
  for (Precision p : cpu_peak_precisions(*make_backend(BackendKind::kCpu, {}))) {
    wanted.emplace_back(BackendKind::kCpu, p);
  }
  if (gpu_available()) {
    for (Precision p : kPrecisions) wanted.emplace_back(BackendKind::kCuda, p);
  }
  for (const auto& [kind, precision] : wanted) {
    const auto backend = make_backend(kind, {});
    const MachinePeak peak = measure_peak(*backend, precision);
    save_peak(path, peak);
    fmt::print(
        "{} {} ({}{}): {:.1f} GFLOP/s, {:.1f} GB/s\n  FLOP/s: {}\n  bytes/s: {}\n", peak.backend,
        peak.precision, peak.device, peak.threads ? fmt::format(", {} threads", peak.threads) : "",
        peak.flops_per_s / 1e9, peak.bytes_per_s / 1e9, peak.flops_method, peak.bytes_method);
  }
  fmt::print("kept in {} (training records on this host now give their fraction of it)\n", path);
  return 0;
}

}  // namespace dlb
