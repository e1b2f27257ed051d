#include "runtime/train/executor.h"

#include <fmt/format.h>

#include "runtime/core/error.h"
#include "runtime/core/nvtx.h"

namespace dlb {

Executor::Executor(Schedule schedule, PassRunners runners, const Clock& clock)
    : schedule_(std::move(schedule)), runners_(runners), clock_(clock) {
  for (const Step& step : schedule_.steps) runner_for(step);  // throws if one is missing
}

PassRunner& Executor::runner_for(const Step& step) const {
  PassRunner* runner = step.pass == Pass::kLoss   ? runners_.loss
                       : step.pass == Pass::kSync ? runners_.sync
                                                  : runners_.layers;
  if (!runner) {
    throw InvalidArgument(fmt::format(
        "the schedule has {} passes and the executor no runner for them", step_name(step)));
  }
  return *runner;
}

std::string Executor::describe(const Step& step) const {
  const std::string& label = runner_for(step).label(step);
  if (step.pass != Pass::kSync) return fmt::format("{} of {}", step_name(step), label);
  if (step.arg < 0) return fmt::format("{} of every {}", step_name(step), label);
  return fmt::format("{} of {} {}", step_name(step), label, step.arg);
}

void Executor::run(const LayerContext* ctx, PassObserver* observer) {
  const bool marks = observer && observer->wants_marks();
  for (const Step& step : schedule_.steps) {
    PassRunner& runner = runner_for(step);
    {
      // Nsight's name for the pass: its trace span's (a layer, "loss", "sgd bucket"); a sync
      // pass with no span says what it does to which bucket ("allreduce of bucket 2").
      const bool spanless_sync = step.pass == Pass::kSync && !runner.traced(step);
      NvtxRange range(spanless_sync ? describe(step).c_str() : runner.label(step).c_str());
      const Mark start = marks ? clock_.mark() : Mark{};
      runner.run_pass(step, ctx);
      if (marks) observer->pass_ran(step, runner, start, clock_.mark());
    }
    // --memory-guard: every zone read back after every pass (on a GPU, once the pass has run).
    if (ctx && ctx->backend.allocator().guarded()) {
      ctx->backend.allocator().check_guards(describe(step));
    }
  }
}

}  // namespace dlb
