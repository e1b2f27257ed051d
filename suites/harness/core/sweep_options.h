// The sweep's own flags (`dlbench --suite=NAME ...`), each defined once, in a table of the same
// Options as a run's (option_table.h): their types, ranges and allowed values are checked the
// same way, their defaults are SweepOptions' own, and --help is made from the table.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "suites/harness/core/launcher.h"
#include "suites/harness/core/option_table.h"
#include "suites/harness/core/suite.h"

namespace dlb {

// A suite's `simulate` block (docs/simulation.md) is run by dlbench simulate's code: main.cpp
// hands the sweep its two steps, so that the sweep includes no other command. `check` refuses a
// block before any point runs; `run` simulates from the points' results, false where a point was
// refused. Unset, a suite with a simulate block is refused.
struct SuiteSimulation {
  std::function<void(const nlohmann::json& block, const std::string& suite_path)> check;
  std::function<bool(const nlohmann::json& block, const std::string& out)> run;
};

struct SweepOptions {
  std::string suite;
  // Non-empty: run every point on each of these systems in turn (set_systems).
  std::vector<std::string> systems;
  std::string out_dir;  // default out/<suite name>
  // The JPEG images of the points with data folder or shards (a folder with train/, or shards);
  // empty: the suite's dataset block's, made in the output directory.
  std::string data_path;
  bool resume = false, dry_run = false;
  double timeout_s = 900;
  LauncherKind launcher = LauncherKind::kAuto;
  // Timed steps of each point traced (a point's trace_steps, capped at its steps). A single
  // `dlbench run` traces none by default; a sweep traces 3, for its reports' phase breakdown.
  int64_t trace_steps = 3;
  int64_t max_points = static_cast<int64_t>(kDefaultMaxPoints);
  bool report = true;  // render plots and report.{md,html} at the end (needs reports/' Python)
  std::string inject_fault;  // test-only: "crash@I", "hang@I" or "oom@I" for point I (1-based)
  SuiteSimulation simulation;
};

struct SweepFlag {
  // Key, type, help, allowed values, range and whether --help hides it. (Its set and get are a
  // run's, and unused here.)
  Option option;
  std::function<void(SweepOptions&, const nlohmann::json&)> set;
  // Its value in a SweepOptions: SweepOptions{}'s is the default --help shows.
  std::function<nlohmann::json(const SweepOptions&)> get;
};

const std::vector<SweepFlag>& sweep_flag_table();
// Checks `value` (command-line text, as value_from_text reads it) against the flag's type,
// values and range, then sets it. Throws InvalidArgument naming the flag.
void apply_sweep_flag(SweepOptions& o, const SweepFlag& flag, const std::string& text);
// InvalidArgument for any value out of its flag's type, values or range (options made in code).
void validate_sweep_options(const SweepOptions& options);

}  // namespace dlb
