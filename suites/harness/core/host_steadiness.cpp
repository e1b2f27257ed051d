#include "suites/harness/core/host_steadiness.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "runtime/core/error.h"
#include "runtime/core/stats.h"
#include "suites/harness/core/noise.h"
#include "suites/harness/core/timed_phase.h"

namespace dlb {

namespace {

constexpr size_t kElements = size_t{16} << 20;  // 64 MiB of floats an array
constexpr int kAddsPerPass = 4;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The compiler must take `p`'s memory as read and written here (google/benchmark's
// DoNotOptimize and ClobberMemory): the adds around it are neither left out nor moved across
// the clock's readings.
void keep(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

// One pass of kAddsPerPass adds c = a + b; its time.
double timed_pass(const std::vector<float>& a, const std::vector<float>& b, std::vector<float>& c) {
  const auto start = std::chrono::steady_clock::now();
  for (int k = 0; k < kAddsPerPass; ++k) {
    keep(c.data());
    for (size_t i = 0; i < c.size(); ++i) c[i] = a[i] + b[i];
    keep(c.data());
  }
  return seconds_since(start);
}

std::string gb_per_s(double bytes_per_s) { return fmt::format("{:.1f}", bytes_per_s / 1e9); }

}  // namespace

Steadiness steadiness_of(const std::vector<double>& t, double bytes_per_pass) {
  Steadiness s;
  s.passes = static_cast<int64_t>(t.size());
  s.bytes_per_pass = bytes_per_pass;
  if (t.empty()) return s;
  const auto [fastest, slowest] = std::minmax_element(t.begin(), t.end());
  if (!(*fastest > 0)) {
    throw InvalidArgument(fmt::format("host steadiness: a pass took {} s", *fastest));
  }
  s.median_bytes_per_s = bytes_per_pass / percentile(t, 50);
  s.min_bytes_per_s = bytes_per_pass / *slowest;
  s.max_bytes_per_s = bytes_per_pass / *fastest;
  s.cv = spread(t).cv;
  return s;
}

Steadiness measure_steadiness(double seconds) {
  const std::vector<float> a(kElements, 1.0f), b(kElements, 2.0f);
  std::vector<float> c(kElements, 0.0f);
  timed_pass(a, b, c);
  std::vector<double> t;
  const auto start = std::chrono::steady_clock::now();
  while (static_cast<int64_t>(t.size()) < kSteadinessPasses || seconds_since(start) < seconds) {
    t.push_back(timed_pass(a, b, c));
  }
  if (c[kElements / 2] != 3.0f) throw std::logic_error("host steadiness: 1 + 2 is not 3");
  return steadiness_of(t, kAddsPerPass * 3.0 * sizeof(float) * static_cast<double>(kElements));
}

std::string steadiness_summary(const Steadiness& s) {
  return fmt::format("{} GB/s (median of {} passes; {} to {}, CV {:.1f}%)",
                     gb_per_s(s.median_bytes_per_s), s.passes, gb_per_s(s.min_bytes_per_s),
                     gb_per_s(s.max_bytes_per_s), 100 * s.cv);
}

nlohmann::json steadiness_json(const Steadiness& s, const std::string& when) {
  return {{"when", when},
          {"passes", s.passes},
          {"bytes_per_pass", s.bytes_per_pass},
          {"median_bytes_per_s", s.median_bytes_per_s},
          {"min_bytes_per_s", s.min_bytes_per_s},
          {"max_bytes_per_s", s.max_bytes_per_s},
          {"cv", s.cv}};
}

std::optional<std::string> steadiness_reason(const Steadiness& s, const std::string& when) {
  if (!(s.cv > kNoisyStepCv)) return std::nullopt;
  return fmt::format(
      "host {}: a fixed memory stream (one thread, nothing of dlbench) moved {} to {} GB/s, its "
      "passes' times varying by CV {:.1f}% (the host's speed changed)",
      when, gb_per_s(s.min_bytes_per_s), gb_per_s(s.max_bytes_per_s), 100 * s.cv);
}

std::optional<std::string> steadiness_change_reason(const Steadiness& before,
                                                    const Steadiness& after) {
  if (!(before.median_bytes_per_s > 0 && after.median_bytes_per_s > 0)) return std::nullopt;
  const double change = after.median_bytes_per_s / before.median_bytes_per_s - 1;
  if (!(std::abs(change) > kNoisyStepCv)) return std::nullopt;
  return fmt::format(
      "host: a fixed memory stream (one thread, nothing of dlbench) moved {} GB/s before the runs "
      "and {} after them ({:+.1f}%: the host's speed changed between them)",
      gb_per_s(before.median_bytes_per_s), gb_per_s(after.median_bytes_per_s), 100 * change);
}

}  // namespace dlb
