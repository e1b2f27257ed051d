// libFuzzer target: a suite file, through everything --dry-run does with it: the parse and the
// schema (with and without the cpu override), the expansion into points (capped lower than the
// command line's default, to keep each input fast), and each point's config through the option
// table and the checks of options that go together.
#include <cstdint>

#include "suites/harness/core/option_table.h"
#include "suites/harness/core/run_options.h"
#include "suites/harness/core/suite.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (const bool cpu : {false, true}) {
    dlb::fuzz::run_reader([&] {
      const dlb::Suite suite = dlb::parse_suite(dlb::fuzz::as_text(data, size), "input", cpu);
      for (const nlohmann::json& point : dlb::expand(suite, 256)) {
        dlb::fuzz::run_reader([&] {
          const dlb::RunOptions o = dlb::options_from_json(point);
          dlb::validate_run_options(o);
          dlb::config_json(o);
        });
      }
    });
  }
  return 0;
}
