// libFuzzer target: the safetensors reader (weights for --init, batches for --batch-file). What it
// accepts must also be well formed: every tensor's bytes match its shape and dtype.
#include <cstdint>

#include "runtime/io/safetensors.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return dlb::fuzz::run_reader([&] {
    const dlb::StateDict tensors = dlb::parse_safetensors(dlb::fuzz::as_text(data, size), "input");
    for (const auto& [name, t] : tensors) {
      if (t.bytes.size() != static_cast<size_t>(t.shape.numel()) * dlb::dtype_size(t.dtype))
        std::abort();
    }
  });
}
