// libFuzzer target: the digits CSV (--data=digits, --data-path). What it accepts holds 64 pixels
// in [0, 1] and a label 0-9 per sample.
#include <cstdint>

#include "tests/fuzz/fuzz_target.h"
#include "workloads/data/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return dlb::fuzz::run_reader([&] {
    const dlb::Dataset d = dlb::parse_digits_csv(dlb::fuzz::as_text(data, size), "input");
    if (d.images.size() != d.labels.size() * 64) std::abort();
    for (float v : d.images)
      if (!(v >= 0.f && v <= 1.f)) std::abort();
    for (int64_t l : d.labels)
      if (l < 0 || l > 9) std::abort();
  });
}
