#include "runtime/train/executor.h"

#include <fmt/format.h>

#include "runtime/core/error.h"
#include "runtime/core/nvtx.h"

namespace dlb {

Executor::Executor(Schedule schedule, PassRunners runners, const Clock& clock)
    : Executor(std::make_shared<const Schedule>(std::move(schedule)), runners, clock) {}

Executor::Executor(std::shared_ptr<const Schedule> schedule, PassRunners runners,
                   const Clock& clock)
    : schedule_(std::move(schedule)), runners_(runners), clock_(clock) {
  // describe() finds each step's runner: a missing one throws here, not mid-step.
  described_.reserve(schedule_->steps.size());
  for (const Step& step : schedule_->steps) described_.push_back(describe(step));
}

PassRunner& Executor::runner_for(const Step& step) const {
  PassRunner* runner = step.pass == Pass::kLoss   ? runners_.loss
                       : step.pass == Pass::kSync ? runners_.sync
                       : is_swap_pass(step.pass)  ? runners_.swap
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

void Executor::run(int64_t index, const LayerContext* ctx, PassObserver* observer) {
  for (PassRunner* runner : {runners_.layers, runners_.loss, runners_.sync, runners_.swap}) {
    if (runner) runner->begin_step(index);
  }
  const bool marks = observer && observer->wants_marks();
  for (size_t i = 0; i < schedule_->steps.size(); ++i) {
    const Step& step = schedule_->steps[i];
    PassRunner& runner = runner_for(step);
    {
      // Nsight's name for the pass: its trace span's (a layer, "loss", "sgd bucket"); a sync
      // pass with no span says what it does to which bucket ("allreduce of bucket 2").
      const bool spanless_sync = step.pass == Pass::kSync && !runner.traced(step);
      NvtxRange range(spanless_sync ? described_[i].c_str() : runner.label(step).c_str());
      const Mark start = marks ? clock_.mark() : Mark{};
      runner.run_pass(step, ctx);
      if (marks) observer->pass_ran(step, runner, start, clock_.mark());
    }
    // --memory-guard: every zone read back after every pass (on a GPU, once the pass has run).
    if (ctx && ctx->backend.allocator().guarded()) {
      ctx->backend.allocator().check_guards(described_[i]);
    }
  }
}

}  // namespace dlb
