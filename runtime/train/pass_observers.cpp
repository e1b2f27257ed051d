#include "runtime/train/pass_observers.h"

#include <utility>

#include "runtime/overlap/sync_schedule.h"

namespace dlb {

void TracedPasses::pass_ran(const Step& step, const PassRunner& runner, const Mark& start,
                            const Mark& end) {
  if (!runner.traced(step)) return;
  Span span{runner.label(step), step_name(step), step.lane};
  if (step.pass == Pass::kSync) span.bucket = traced_bucket(step);
  span.layer = step.node >= 0 && step.pass != Pass::kLoss && !is_swap_pass(step.pass);
  if (const std::pair<Mark, Mark>* own = runner.lane_marks(step)) {
    tracer_.record(std::move(span), own->first, own->second);
    return;
  }
  tracer_.record(std::move(span), start, end);
}

void HookedPasses::pass_ran(const Step& step, const PassRunner& runner, const Mark& start,
                            const Mark& end) {
  if (next_ && next_->wants_marks()) next_->pass_ran(step, runner, start, end);
  hook_(static_cast<size_t>(&step - schedule_.steps.data()));
}

}  // namespace dlb
