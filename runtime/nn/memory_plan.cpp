#include "runtime/nn/memory_plan.h"

#include <algorithm>

namespace dlb {

MemoryPlan naive_plan(const Schedule& schedule, const std::vector<TensorInfo>& tensors) {
  MemoryPlan plan;
  const size_t last = schedule.steps.empty() ? 0 : schedule.steps.size() - 1;
  for (const TensorInfo& t : tensors) {
    if (t.alias_of >= 0) {
      plan.buffer_of.push_back(-1);
      plan.offset_of.push_back(0);
      continue;
    }
    plan.buffer_of.push_back(static_cast<int>(plan.buffers.size()));
    plan.offset_of.push_back(0);
    plan.buffers.push_back({t.name, t.category, t.bytes(), 0, last});
  }
  return plan;
}

PlanPeaks plan_peaks(const MemoryPlan& plan) {
  PlanPeaks peaks;
  size_t steps = 0;
  for (const PlannedBuffer& b : plan.buffers) steps = std::max(steps, b.last_step + 1);
  for (size_t step = 0; step < steps; ++step) {
    std::array<size_t, kNumMemCategories> held{};
    for (const PlannedBuffer& b : plan.buffers)
      if (b.first_step <= step && step <= b.last_step)
        held[static_cast<size_t>(b.category)] += b.bytes;
    size_t total = 0;
    for (size_t c = 0; c < kNumMemCategories; ++c) {
      peaks.by_category[c] = std::max(peaks.by_category[c], held[c]);
      total += held[c];
    }
    peaks.total = std::max(peaks.total, total);
  }
  return peaks;
}

}  // namespace dlb
