// `dlbench run --print-step`: the step's program for the run's options (runtime/train/
// step_program.h), built and planned as the Trainer would, printed, and nothing trained.
#pragma once
#include <cstdio>

#include "suites/harness/core/run_options.h"

namespace dlb {

void print_step(const RunOptions& options, std::FILE* out);

}  // namespace dlb
