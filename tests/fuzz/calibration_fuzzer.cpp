// libFuzzer target: a calibration file (dlbench simulate --calibration=FILE; the simulator's
// calibration/*.json). Any bytes are read or refused with a dlb::Error. A calibration that is
// read is one the simulator can use and copy into its records: every time finite and at least 0,
// a step of at least a microsecond, and the file as written back read again the same.
#include <cmath>
#include <cstdint>

#include "suites/harness/simulate/calibrate.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dlb::fuzz::run_reader([&] {
    const std::string path = dlb::fuzz::as_file(data, size, "calibration.json");
    const dlb::Calibration c = dlb::read_calibration(path);
    bool finite = std::isfinite(c.step_ms) && c.step_ms >= 1e-3 && std::isfinite(c.scale) &&
                  c.scale > 0 && std::isfinite(c.loss_ms) && std::isfinite(c.optimizer_ms);
    for (const dlb::LayerTimes& t : c.layers) {
      for (double ms : {t.forward_ms, t.backward_data_ms, t.backward_weights_ms, t.backward_ms,
                        t.recompute_ms}) {
        finite = finite && std::isfinite(ms) && ms >= 0;
      }
    }
    dlb::fuzz::require(finite, "a calibration read with a time no simulation can use");
    const nlohmann::json written = dlb::calibration_json(c);
    dlb::fuzz::require(dlb::calibration_json(dlb::parse_calibration(written, "written")) == written,
                       "a calibration that does not read back as it was written");
  });
  return 0;
}
