// libFuzzer target: a --batch-file (safetensors holding "images" and "labels"), read as rank 0 of
// one and as rank 1 of two, for a model of 3 input channels and 10 classes. What it accepts
// holds finite pixels and labels in range.
#include <cmath>
#include <cstdint>

#include "runtime/io/safetensors.h"
#include "tests/fuzz/fuzz_target.h"
#include "workloads/data/batch_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return dlb::fuzz::run_reader([&] {
    const dlb::StateDict tensors = dlb::parse_safetensors(dlb::fuzz::as_text(data, size), "input");
    for (const dlb::BatchFileShape want : {dlb::BatchFileShape{3, 10, 0, 1}, {3, 10, 1, 2}}) {
      const dlb::Dataset d = dlb::batch_from_tensors(tensors, "input", want);
      if (d.size() < 1 || d.images.size() != static_cast<size_t>(d.size() * d.image_elems()))
        std::abort();
      for (float v : d.images)
        if (!std::isfinite(v)) std::abort();
      for (int64_t l : d.labels)
        if (l < 0 || l >= 10) std::abort();
    }
  });
}
