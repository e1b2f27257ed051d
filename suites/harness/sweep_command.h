// `dlbench --suite=NAME`: expand a suite into points, run each in an isolated worker with a
// timeout, append one record per point to results.jsonl, and summarise.
#pragma once
#include <string>
#include <vector>

#include "suites/harness/launcher.h"
#include "suites/harness/suite.h"

namespace dlb {

struct SweepOptions {
  std::string suite;
  // Non-empty: run every point on each of these systems in turn (set_systems).
  std::vector<std::string> systems;
  std::string out_dir;  // default out/<suite name>
  bool resume = false, dry_run = false;
  double timeout_s = 900;
  LauncherKind launcher = LauncherKind::kAuto;
  int64_t trace_steps = 3;
  int64_t max_points = static_cast<int64_t>(kDefaultMaxPoints);
  bool report = true;  // render plots and report.{md,html} at the end (needs reports/' Python)
  std::string inject_fault;  // test-only: "crash@I", "hang@I" or "oom@I" for point I (1-based)
};

// InvalidArgument for a flag out of range: --timeout in (0, kLongestWaitSeconds], --trace-steps
// >= 0, --max-points >= 1. Both commands below call it first.
void validate_sweep_options(const SweepOptions& options);
int sweep_command(const SweepOptions& options);
// `dlbench --suite=micro`: the micro-benchmarks, their all-reduce rows and their report
// (micro_command.cpp); `options` gives the output directory, --resume, --timeout, --no-report.
int micro_command(const SweepOptions& options);
// `dlbench worker --point=FILE`: one point, as the harness launches it.
int worker_command(const std::string& point_file);

}  // namespace dlb
