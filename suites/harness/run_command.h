// `dlbench run`: train one configuration and write one result record.
#pragma once
#include "suites/harness/run_options.h"

namespace dlb {

// Throws what run_command would for these options before building anything (InvalidArgument,
// or Unsupported for ranks > 1), so the harness can record a point without launching it.
void validate_run_options(const RunOptions& options);

// Runs and returns the process exit code; throws dlb::Error on failure.
int run_command(const RunOptions& options);

}  // namespace dlb
