#include "runtime/trace/phase_metrics.h"

#include <algorithm>

namespace dlb {

nlohmann::json phase_metrics(const Tracer& tracer) {
  double forward = 0, backward = 0, loss = 0, optimizer = 0, copy = 0, step = 0, recompute = 0;
  for (const Span& s : tracer.spans()) {
    const double d = s.duration_us * 1e-6;
    if (s.category == kStepCategory) {
      step += d;
    } else if (s.lane == Lane::kCopy) {
      copy += d;
    } else if (s.lane != Lane::kCompute) {
      continue;
    } else if (s.category == "forward") {
      forward += d;
    } else if (s.category == "backward_data" || s.category == "backward_weights" ||
               s.category == "backward" || s.category == "accumulate") {
      backward += d;
    } else if (s.category == "recompute") {
      recompute += d;
    } else if (s.category == "loss") {
      loss += d;
    } else if (s.category == "optimizer") {
      optimizer += d;
    }
  }
  const double n = static_cast<double>(std::max<int64_t>(tracer.traced_steps(), 1));
  return {{"traced_steps", tracer.traced_steps()},
          {"step_s", step / n},
          {"forward_s", forward / n},
          {"backward_s", backward / n},
          {"loss_s", loss / n},
          {"optimizer_s", optimizer / n},
          {"recompute_s", recompute / n},
          {"copy_s", copy / n}};
}

}  // namespace dlb
