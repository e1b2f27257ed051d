#include "suites/harness/run/run_command.h"

#include <fmt/format.h>

#include "runtime/core/error.h"
#include "runtime/io/output_file.h"
#include "suites/harness/core/launcher.h"
#include "suites/harness/core/point_file.h"
#include "suites/harness/core/record.h"
#include "suites/harness/run/maxbatch.h"
#include "suites/harness/run/print_step.h"
#include "suites/harness/run/training.h"

namespace dlb {

int run_command(const RunOptions& o) {
  if (o.system != System::kDlbench) {
    throw InvalidArgument(fmt::format(
        "--system={}: `dlbench run` trains dlbench; a peer runs beside it in a sweep "
        "(dlbench --suite=NAME --systems=dlbench,{}), or alone as reports/peers/{}_train.py",
        system_name(o.system), system_name(o.system), system_name(o.system)));
  }
  if (o.print_step) {
    print_step(o, stdout);
    return 0;
  }
  RunResult r = run_training(o);
  if (r.rank != 0) return 0;  // only rank 0 prints and writes the record
  // After the run, whose memory is released by now: the probes may take all of the device's.
  if (o.max_batch_budget && r.status == RunStatus::kOk) {
    const MaxBatchSearch s = find_max_batch(o, *o.max_batch_budget);
    r.max_batch =
        RunResult::MaxBatch{*o.max_batch_budget, s.batch, static_cast<int64_t>(s.probes.size()),
                            s.reached_limit, s.found() ? s.found()->memory->total_peak : 0};
  }
  attach_peak(r);
  attach_noise(r);
  print_result(r, stdout);
  if (!o.json_path.empty()) write_json_atomically(o.json_path, record_json(r));
  return r.status == RunStatus::kDiverged ? kExitDiverged : 0;
}

int worker_command(const std::string& point_file) {
  RunOptions o = read_point_file(point_file);
  try {
    return run_command(o);
  } catch (const Error& e) {
    // The worker records its own failure, with its status and message; the error still goes to
    // stderr (the point's log) and sets the exit code.
    if (launched_rank() == 0) {
      write_json_atomically(o.json_path,
                            record_json(failed_run(o, status_for(e.kind()), e.what())));
    }
    throw;
  } catch (const std::exception& e) {
    if (launched_rank() == 0) {
      write_json_atomically(o.json_path,
                            record_json(failed_run(o, RunStatus::kFailed,
                                                   fmt::format("internal error: {}", e.what()))));
    }
    throw;
  }
}

}  // namespace dlb
