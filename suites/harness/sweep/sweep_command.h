// `dlbench --suite=NAME`: expand a suite into points, run each in an isolated worker with a
// timeout, append one record per point to results.jsonl, and summarise.
#pragma once
#include <string>
#include <vector>

#include "suites/harness/core/launcher.h"
#include "suites/harness/core/suite.h"
#include "suites/harness/core/sweep_options.h"

namespace dlb {

int sweep_command(const SweepOptions& options);
// `dlbench --suite=micro`: the micro-benchmarks, their all-reduce rows and their report
// (micro_command.cpp); `options` gives the output directory, --resume, --timeout, --no-report.
int micro_command(const SweepOptions& options);

}  // namespace dlb
