// libFuzzer target: a point file, as `dlbench worker --point=FILE` reads it (the harness writes
// it; a user or a test may too). Any bytes are read or refused with a dlb::Error; what is read
// goes on through the checks of options that go together and back into a record's config.
#include <cstdint>

#include "suites/harness/core/option_table.h"
#include "suites/harness/core/point_file.h"
#include "suites/harness/core/run_options.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dlb::fuzz::run_reader([&] {
    const dlb::RunOptions o = dlb::parse_point(dlb::fuzz::as_text(data, size), "input");
    dlb::validate_run_options(o);
    dlb::config_json(o).dump();
  });
  return 0;
}
