// The machine's measured peak: the rate every micro-benchmark row and every training record is
// a fraction of. Measured, not taken from a datasheet: a CPU's model name ("AMD EPYC
// Processor") names no datasheet, and what counts is what this machine's libraries reach.
//   FLOP/s: the best square matrix product (Backend::matmul) over a few sizes, per precision;
//   bytes/s: the best STREAM-style add (c = a + b: two reads and one write per element, the
//   traffic of STREAM's Triad) over tensors far larger than the caches.
// Measured once per machine (`dlbench --suite=micro` or `dlbench bench peak`) and kept in a file
// (peak_file_path) that training runs read.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/io/json_fields.h"
#include "suites/harness/core/environment.h"

namespace dlb {

// More threads than any machine has: a peak file claiming more is not a measurement.
constexpr int64_t kMaxPeakThreads = int64_t{1} << 20;

struct MachinePeak {
  std::string host, device, backend;  // device: the CPU's model name, or the GPU's name
  std::string precision;              // the matrix products' precision ("fp32", "bf16", ...)
  int64_t threads = 0;                // CPU threads the measurement used (0 on a GPU)
  double flops_per_s = 0, bytes_per_s = 0;
  std::string flops_method, bytes_method, measured_at;

  nlohmann::json to_json() const;
  // InvalidArgument naming the file and the key for a field of the wrong type or range.
  static MachinePeak from_json(const JsonFields& fields);
};

// Measures `backend`'s peak at `precision` (its matrix products; bytes/s in f32). About a
// second on a CPU.
MachinePeak measure_peak(Backend& backend, Precision precision);

// Where peaks are kept: $DLBENCH_PEAK_FILE, else $XDG_CACHE_HOME/dlbench/peaks.json, else
// ~/.cache/dlbench/peaks.json.
std::string peak_file_path();
// The threads an OpenMP pool (the CPU backend's) starts here: OMP_NUM_THREADS, else one per CPU
// the process may use (usable_cpus), as OpenMP's default.
int64_t pool_threads();
// The peaks in the file (none when it does not exist). InvalidArgument naming the file and the
// key when it is not a list of peaks, or is not a regular file.
std::vector<MachinePeak> read_peaks(const std::string& path);
// The peaks in a peak file's text; `path` names it in messages.
std::vector<MachinePeak> parse_peaks(std::string_view text, const std::string& path);
// Adds or replaces (same host, device, backend and precision) `peak` in the file, atomically.
void save_peak(const std::string& path, const MachinePeak& peak);
// The peak of this host and device for `backend` at `precision`, from `peaks`; on the CPU, where
// 16-bit data without a peak of its own computes in f32 (cpu_peak_precisions), else its fp32 peak.
std::optional<MachinePeak> find_peak(const std::vector<MachinePeak>& peaks, const std::string& host,
                                     const std::string& device, const std::string& backend,
                                     const std::string& precision);

// The precisions whose peaks differ on this CPU: fp32, and bf16 where the backend multiplies
// bf16 natively (Backend::matmul_arithmetic); fp16 computes in f32 here.
std::vector<Precision> cpu_peak_precisions(const Backend& cpu);

// This host's CPU peaks (cpu_peak_precisions) in the peak file at `path`, each measured now and
// kept there when the file has none (about a second each): the suites' CPU records then give
// their fraction of them. Returns the peaks it measured.
std::vector<MachinePeak> ensure_cpu_peaks(const std::string& path);

// The device name a backend's environment gives ("cpu" -> the CPU's model name).
std::string device_name(const Backend& backend);

}  // namespace dlb
