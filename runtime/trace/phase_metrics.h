// Where a step's time goes, from the spans of a trace window: per traced step, the time of the
// compute lane's forward, backward (data and weights), loss and optimizer spans, and of the whole
// step. Compute spans never nest, so their sum is the compute lane's busy time; the rest of a step
// is exposed communication or host work.
#pragma once
#include <nlohmann/json.hpp>

#include "runtime/trace/tracer.h"

namespace dlb {

// {"traced_steps", "step_s", "forward_s", "backward_s", "loss_s", "optimizer_s", "copy_s"}.
nlohmann::json phase_metrics(const Tracer& tracer);

}  // namespace dlb
