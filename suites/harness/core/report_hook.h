// After a sweep: render its plots and report (reports/, Python) when a Python environment with
// the report packages is there. The results never depend on it: a missing or failing renderer
// is a printed note, and the sweep's exit status stays what the points made it.
#pragma once
#include <string>

namespace dlb {

// The Python that runs reports/: $DLBENCH_PYTHON, else <source>/.venv/bin/python; empty when
// neither exists.
std::string report_python();
// Runs `python -m dlbench_reports report OUT_DIR` and prints what it said.
void render_report(const std::string& out_dir);
// Runs `python -m dlbench_reports micro OUT_DIR` (the micro suite's table and plots) likewise.
void render_micro_report(const std::string& out_dir);

}  // namespace dlb
