#include "suites/harness/core/report_hook.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

#include "suites/harness/core/launcher.h"
#include "suites/harness/core/source_dir.h"

namespace dlb {
namespace fs = std::filesystem;

std::string report_python() {
  if (const char* env = std::getenv("DLBENCH_PYTHON"); env && *env) return env;
  const std::string venv = source_dir() + "/.venv/bin/python";
  return fs::exists(venv) ? venv : "";
}

namespace {

void run_reports(const std::string& command, const std::string& out_dir) {
  const std::string python = report_python();
  if (python.empty()) {
    fmt::print(
        "report: skipped (no Python environment for reports/; scripts/install-deps.sh makes "
        "one, then: scripts/dlbench {} {})\n",
        command, out_dir);
    return;
  }
  const std::string log = out_dir + "/logs/" + command + ".log";
  fs::remove(log);
  LaunchCommand cmd{{python, "-m", "dlbench_reports", command, out_dir},
                    {{"PYTHONPATH", source_dir() + "/reports"}}};
  const ProcessResult r = run_process(cmd, 600, log, [](double) {});
  const std::string said = tail_of_file(log, 2000);
  if (r.exit_code == 0) {
    fmt::print("{}", said);
  } else {
    fmt::print("report: rendering failed ({}); the results are unaffected. {}:\n{}",
               r.timed_out ? "timed out"
               : r.signal  ? fmt::format("signal {}", r.signal)
                           : fmt::format("exit code {}", r.exit_code),
               log, said);
  }
}

}  // namespace

void render_report(const std::string& out_dir) { run_reports("report", out_dir); }
void render_micro_report(const std::string& out_dir) { run_reports("micro", out_dir); }

}  // namespace dlb
