// `dlbench run`: train one configuration and write one result record.
#pragma once
#include <string>

#include "suites/harness/record.h"
#include "suites/harness/run_options.h"

namespace dlb {

// Throws what run_command would for these options before building anything (InvalidArgument,
// or Unsupported for ranks > 1), so the harness can record a point without launching it.
void validate_run_options(const RunOptions& options);

// The runner: trains as the options say, writes the run's traces, profile and weights, and
// returns what it measured. Throws dlb::Error on failure. Every rank calls it.
RunResult run_training(const RunOptions& options);

// Slurm's tasks on node `node` from its per-node list (SLURM_STEP_TASKS_PER_NODE): "4(x2),3" is 4,
// 4 and 3. 0 when the list does not reach that node or does not parse. Ranks on one CPU share its
// peak (the record's fraction_of_peak_flops).
int64_t slurm_tasks_on_node(const std::string& list, int64_t node);

// The exit code of a run that completed but diverged (its loss became inf or NaN): its record
// has status "diverged". Errors use 2 to 6 (runtime/core/error.h).
constexpr int kExitDiverged = 7;

// `dlbench run`: run_training, then rank 0 prints the result and writes its record (--json).
// Returns 0, or kExitDiverged. A failure writes nothing, so a record already there stays as it
// was.
int run_command(const RunOptions& options);

}  // namespace dlb
