// `dlbench run`: train one configuration and write one result record.
#pragma once
#include "suites/harness/record.h"
#include "suites/harness/run_options.h"

namespace dlb {

// Throws what run_command would for these options before building anything (InvalidArgument,
// or Unsupported for ranks > 1), so the harness can record a point without launching it.
void validate_run_options(const RunOptions& options);

// The runner: trains as the options say, writes the run's traces, profile and weights, and
// returns what it measured. Throws dlb::Error on failure. Every rank calls it.
RunResult run_training(const RunOptions& options);

// The exit code of a run that completed but diverged (its loss became inf or NaN): its record
// has status "diverged". Errors use 2 to 6 (runtime/core/error.h).
constexpr int kExitDiverged = 7;

// `dlbench run`: run_training, then rank 0 prints the result and writes its record (--json).
// Returns 0, or kExitDiverged. A failure writes nothing, so a record already there stays as it
// was.
int run_command(const RunOptions& options);

}  // namespace dlb
