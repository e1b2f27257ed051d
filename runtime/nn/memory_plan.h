// Where each tensor of the step is stored (docs/architecture.md, "The step"): a pure function of
// the schedule and the tensor table, so that a planner that reuses memory between tensors whose
// lifetimes do not meet, swapping or recomputation is a drop-in replacement for `naive_plan`.
// Binding (Graph::bind) allocates the plan's buffers and makes each tensor a view into one.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "runtime/memory/allocator.h"
#include "runtime/nn/schedule.h"

namespace dlb {

struct PlannedBuffer {
  std::string name;  // what the allocator records it as: its first tensor's name
  MemCategory category = MemCategory::kActivations;
  size_t bytes = 0;
  // The schedule's steps it must hold its contents over, [first, last]; a buffer held across
  // steps (parameters, state, the batch) spans the whole schedule.
  size_t first_step = 0, last_step = 0;
};

struct MemoryPlan {
  std::vector<PlannedBuffer> buffers;
  // Per tensor of the table: its buffer and its byte offset in it; -1 for a view, which is
  // stored where the tensor it views is.
  std::vector<int> buffer_of;
  std::vector<size_t> offset_of;
};

// Every tensor that is not a view in a buffer of its own, held over the whole step: what a setup
// allocates without a planner.
MemoryPlan naive_plan(const Schedule& schedule, const std::vector<TensorInfo>& tensors);

// The most bytes the plan's buffers hold at once, per category (each category's own peak), and
// of all of them together: a sweep over the buffers' step ranges.
struct PlanPeaks {
  std::array<size_t, kNumMemCategories> by_category{};
  size_t total = 0;
};
PlanPeaks plan_peaks(const MemoryPlan& plan);

}  // namespace dlb
