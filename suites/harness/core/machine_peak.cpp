#include "suites/harness/core/machine_peak.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include "runtime/core/error.h"
#include "runtime/core/host_cpus.h"
#include "runtime/core/precision_policy.h"
#include "runtime/io/json_fields.h"
#include "runtime/io/json_text.h"
#include "runtime/io/text_file.h"
#include "suites/harness/core/environment.h"
#include "suites/harness/core/record.h"

namespace dlb {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The best of `repeat` timings of `fn`, after one untimed call (first touch, thread start).
double best_seconds(Backend& b, int repeat, const std::function<void()>& fn) {
  fn();
  b.synchronize();
  double best = 0;
  for (int i = 0; i < repeat; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    b.synchronize();
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i == 0 || t < best) best = t;
  }
  return best;
}

}  // namespace

int64_t pool_threads() {
  if (const char* n = std::getenv("OMP_NUM_THREADS"); n && std::atoll(n) > 0) return std::atoll(n);
  return usable_cpus();  // as OpenMP's default pool
}

json MachinePeak::to_json() const {
  return {{"host", host},
          {"device", device},
          {"backend", backend},
          {"precision", precision},
          {"threads", threads},
          {"flops_per_s", flops_per_s},
          {"flops_method", flops_method},
          {"bytes_per_s", bytes_per_s},
          {"bytes_method", bytes_method},
          {"measured_at", measured_at}};
}

MachinePeak MachinePeak::from_json(const JsonFields& f) {
  MachinePeak p;
  p.host = f.string("host");
  p.device = f.string("device");
  p.backend = f.string("backend");
  p.precision = f.string("precision");
  // A CPU measurement used at least one thread; a GPU's uses none of the host's.
  p.threads = p.backend == "cpu" ? f.integer("threads", 1, kMaxPeakThreads)
                                 : f.integer("threads", 0, kMaxPeakThreads);
  // At least one per second: a peak is a divisor, and a subnormal one makes every fraction of
  // it infinite.
  p.flops_per_s = f.number("flops_per_s", 1.0);
  p.flops_method = f.string("flops_method");
  p.bytes_per_s = f.number("bytes_per_s", 1.0);
  p.bytes_method = f.string("bytes_method");
  p.measured_at = f.string("measured_at");
  return p;
}

std::string device_name(const Backend& backend) {
  const auto env = backend.environment();
  const auto it = env.find("device");
  return it == env.end() || it->second == "cpu" ? cpu_model() : it->second;
}

MachinePeak measure_peak(Backend& b, Precision precision) {
  const bool cpu = b.name() == "cpu";
  MachinePeak p;
  p.host = host_name();
  p.device = device_name(b);
  p.backend = std::string(b.name());
  p.precision = std::string(precision_name(precision));
  p.threads = cpu ? pool_threads() : 0;
  p.measured_at = utc_now_iso8601();
  // Matrix products: square, large enough to leave the caches, small enough to take a second.
  const std::vector<int64_t> sizes =
      cpu ? std::vector<int64_t>{1024, 2048} : std::vector<int64_t>{4096, 8192};
  const DType dt = PrecisionPolicy::for_precision(precision).activations;
  int64_t best_n = 0;
  for (int64_t n : sizes) {
    Tensor a = b.empty({n, n}, dt, MemCategory::kWorkspace, "peak operand");
    Tensor c = b.empty({n, n}, dt, MemCategory::kWorkspace, "peak operand");
    Tensor y = b.empty({n, n}, dt, MemCategory::kWorkspace, "peak result");
    b.fill(a, 0.5f);
    b.fill(c, 0.25f);
    b.fill(y, 0);
    const double t = best_seconds(b, 5, [&] { b.matmul(precision, false, false, 1, a, c, 0, y); });
    const double rate = 2.0 * static_cast<double>(n) * n * n / t;
    if (rate > p.flops_per_s) p.flops_per_s = rate, best_n = n;
  }
  p.flops_method = fmt::format(
      "best of 5 square matrix products (Backend::matmul, {} data) at n = {}: the best, at n = "
      "{}",
      dtype_name(dt), fmt::join(sizes, ", "), best_n);
  // Memory: c = a + b over f32 tensors far beyond the last-level cache.
  const int64_t elements = (cpu ? int64_t{64} : int64_t{1024}) << 18;  // 64 MiB / 1 GiB each
  Tensor x = b.empty({elements}, DType::kF32, MemCategory::kWorkspace, "peak operand");
  Tensor z = b.empty({elements}, DType::kF32, MemCategory::kWorkspace, "peak operand");
  Tensor y = b.empty({elements}, DType::kF32, MemCategory::kWorkspace, "peak result");
  b.fill(x, 1);
  b.fill(z, 2);
  b.fill(y, 0);
  const double t = best_seconds(b, 10, [&] { b.add(x, z, y); });
  p.bytes_per_s = 3.0 * 4.0 * static_cast<double>(elements) / t;
  p.bytes_method = fmt::format(
      "best of 10 STREAM-style adds c = a + b (Backend::add) over three f32 tensors of {} MiB: "
      "2 reads + 1 write per element, the traffic STREAM's Triad counts",
      elements * 4 >> 20);
  return p;
}

std::string peak_file_path() {
  if (const char* f = std::getenv("DLBENCH_PEAK_FILE"); f && *f) return f;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    return std::string(x) + "/dlbench/peaks.json";
  }
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/dlbench/peaks.json";
}

std::vector<MachinePeak> parse_peaks(std::string_view text, const std::string& path) {
  const std::string where =
      fmt::format("peak file {} (delete it and measure again: dlbench bench peak)", path);
  const json j = parse_json(text, where);
  const JsonFields file(j, where);
  const json& list = file.array("peaks");
  std::vector<MachinePeak> out;
  for (size_t i = 0; i < list.size(); ++i) {
    out.push_back(MachinePeak::from_json(JsonFields(list[i], file.element("peaks", i))));
  }
  return out;
}

std::vector<MachinePeak> read_peaks(const std::string& path) {
  if (!path_exists(path)) return {};
  return parse_peaks(read_text_file(path, "peak file"), path);
}

void save_peak(const std::string& path, const MachinePeak& peak) {
  std::vector<MachinePeak> peaks = read_peaks(path);
  json list = json::array();
  for (const auto& p : peaks) {
    const bool same = p.host == peak.host && p.device == peak.device && p.backend == peak.backend &&
                      p.precision == peak.precision;
    if (!same) list.push_back(p.to_json());
  }
  list.push_back(peak.to_json());
  const fs::path dir = fs::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty()) fs::create_directories(dir, ec);
  if (ec) {
    throw IoError(fmt::format("cannot create the peak file's directory '{}': {}", dir.string(),
                              ec.message()));
  }
  write_json_atomically(path, {{"kind", "dlbench_peaks"}, {"peaks", list}});
}

std::optional<MachinePeak> find_peak(const std::vector<MachinePeak>& peaks, const std::string& host,
                                     const std::string& device, const std::string& backend,
                                     const std::string& precision) {
  // A CPU precision without a peak of its own computes in f32 (cpu_peak_precisions). A GPU's
  // peak is per precision.
  std::vector<std::string> wanted = {precision};
  if (backend == "cpu") wanted.push_back("fp32");
  for (const std::string& want : wanted) {
    for (const auto& p : peaks) {
      if (p.host == host && p.device == device && p.backend == backend && p.precision == want) {
        return p;
      }
    }
  }
  return std::nullopt;
}

std::vector<Precision> cpu_peak_precisions(const Backend& cpu) {
  std::vector<Precision> out = {Precision::kFp32};
  const OpTypes bf16 = OpTypes::of(PrecisionPolicy::for_precision(Precision::kBf16));
  if (cpu.matmul_arithmetic(bf16).operands == DType::kBF16) out.push_back(Precision::kBf16);
  return out;
}

std::vector<MachinePeak> ensure_cpu_peaks(const std::string& path) {
  const auto backend = make_backend(BackendKind::kCpu, {});
  const std::vector<MachinePeak> peaks = read_peaks(path);
  std::vector<MachinePeak> measured;
  for (Precision p : cpu_peak_precisions(*backend)) {
    const std::string name(precision_name(p));
    const auto kept =
        find_peak(peaks, host_name(), device_name(*backend), std::string(backend->name()), name);
    if (kept && kept->precision == name) continue;
    measured.push_back(measure_peak(*backend, p));
    save_peak(path, measured.back());
  }
  return measured;
}

}  // namespace dlb
