// libFuzzer target: a check-ops instance text (dlbench check-ops --instance=TEXT). Any bytes are
// parsed or refused with a dlb::Error. An instance that parses is its own canonical text (it
// parses back to the same text), within the size limits, with a finite memory estimate and its
// passes on every precision.
#include <cmath>
#include <cstdint>

#include "runtime/check/op_instance.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dlb::fuzz::run_reader([&] {
    const dlb::OpInstance op = dlb::parse_op_instance(dlb::fuzz::as_text(data, size));
    const std::string spec = op.spec();
    dlb::fuzz::require(dlb::parse_op_instance(spec).spec() == spec,
                       "an instance whose text does not parse back to itself");
    dlb::check_instance_sizes(op);
    const double bytes = dlb::check_bytes_estimate(op);
    dlb::fuzz::require(std::isfinite(bytes) && bytes > 0, "an instance with no memory estimate");
    dlb::fuzz::require(std::isfinite(op.forward_flops()), "an instance with no FLOP count");
    for (dlb::Precision p : dlb::kPrecisions) {
      for (bool fused : {false, true}) (void)dlb::passes_of(op, p, {fused, fused});
    }
  });
  return 0;
}
