// libFuzzer target: a device file (dlbench simulate --roofline=FILE.json; suites/devices/). Any
// bytes are read or refused with a dlb::Error. A device that is read calibrates its references'
// model by the roofline, or refuses it with a dlb::Error: a calibration it makes has a finite
// step of at least a microsecond.
#include <cmath>
#include <cstdint>

#include "suites/harness/simulate/calibrate.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dlb::fuzz::run_reader([&] {
    const dlb::DeviceFile d = dlb::load_device(dlb::fuzz::as_file(data, size, "device.json"));
    dlb::fuzz::require(!d.references.empty(), "a device read without a reference");
    const dlb::DeviceReference& r = d.references.front();
    const dlb::Calibration c =
        dlb::roofline_calibration(d, r.model, r.batch, r.image_size, r.precision);
    dlb::fuzz::require(std::isfinite(c.step_ms) && c.step_ms >= 1e-3,
                       "a roofline calibration whose step no simulation can use");
  });
  return 0;
}
