// `dlbench run`: train one configuration and write one result record; `dlbench worker`: one
// point of a suite, as the harness launches it.
#pragma once
#include <string>

#include "suites/harness/core/run_options.h"

namespace dlb {

// The exit code of a run that completed but diverged (its loss became inf or NaN): its record
// has status "diverged". Errors use 2 to 6 (runtime/core/error.h).
constexpr int kExitDiverged = 7;

// `dlbench run`: run_training, then rank 0 prints the result and writes its record (--json).
// Returns 0, or kExitDiverged. A failure writes nothing, so a record already there stays as it
// was.
int run_command(const RunOptions& options);

// `dlbench worker --point=FILE`: one point of a suite, as the harness launches it: run_command
// on the point file's options; a failure writes the point's record of it, then throws on.
int worker_command(const std::string& point_file);

}  // namespace dlb
