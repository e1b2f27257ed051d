// libFuzzer target: a peak file (dlbench bench peak writes it; every training record and the
// micro-benchmarks read it, and divide by it). Any bytes are read or refused with a dlb::Error; a
// peak that is read must be one a fraction of peak can be taken of: finite rates of at least one
// per second, and a thread count of at least one on a CPU.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "suites/harness/core/machine_peak.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dlb::fuzz::run_reader([&] {
    for (const dlb::MachinePeak& p : dlb::parse_peaks(dlb::fuzz::as_text(data, size), "input")) {
      const bool rates = std::isfinite(p.flops_per_s) && p.flops_per_s >= 1 &&
                         std::isfinite(p.bytes_per_s) && p.bytes_per_s >= 1;
      const bool threads =
          p.threads >= (p.backend == "cpu" ? 1 : 0) && p.threads <= dlb::kMaxPeakThreads;
      if (!rates || !threads) {
        std::fprintf(stderr, "fuzz: a peak accepted that no fraction can be taken of\n");
        std::abort();
      }
      p.to_json().dump();
    }
  });
  return 0;
}
