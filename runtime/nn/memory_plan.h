// Where each tensor of the step is stored (docs/architecture.md, "The step"): a pure function of
// the schedule and the tensor table, so that a planner that reuses memory between tensors whose
// lifetimes do not meet, swapping or recomputation is a drop-in replacement for `naive_plan`.
// Binding (Graph::bind) allocates the plan's buffers and makes each tensor a view into one.
#pragma once
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/memory/allocator.h"
#include "runtime/nn/schedule.h"

namespace dlb {

// Which plan stores the step (--memory-plan): every tensor on its own; step-local tensors sharing
// bytes where their lifetimes do not meet; or that, over a backward reordered to free bytes
// sooner (runtime/nn/reorder.h).
enum class MemoryPlanKind { kNaive, kReuse, kReorder };
inline constexpr MemoryPlanKind kMemoryPlanKinds[] = {
    MemoryPlanKind::kNaive, MemoryPlanKind::kReuse, MemoryPlanKind::kReorder};
const char* memory_plan_name(MemoryPlanKind k);
std::optional<MemoryPlanKind> parse_memory_plan(std::string_view s);

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
  size_t bytes() const;         // what binding allocates: every buffer's bytes
  size_t device_bytes() const;  // of them, the device's (not host-swap memory)
  // Per tensor of the table: its buffer and its byte offset in it; -1 for a view, which is
  // stored where the tensor it views is.
  std::vector<int> buffer_of;
  std::vector<size_t> offset_of;
};

// Every tensor that is not a view in a buffer of its own, held over the whole step: what a setup
// allocates without a planner.
MemoryPlan naive_plan(const Schedule& schedule, const std::vector<TensorInfo>& tensors);

// The steps over which a stored tensor (not a view) must hold its bytes: from its first access to
// its last, a view's accesses counting as its storage's, less the gaps before a pass that
// overwrites all of it without reading it (a recomputed activation holds nothing between its
// last forward use and its recomputation). Held over the whole schedule (`whole`): what lives
// across steps (parameters, gradients, optimizer state, buffers, the batch, losses, carried
// gradients), what is read before it is written (it counts on an earlier step's contents), what
// no step touches, and `kept` (read after the schedule, such as the logits).
struct Lifetime {
  size_t first = 0, last = 0;
  bool whole = true;
  // The step ranges [from, to] it holds contents over, in order, within [first, last].
  std::vector<std::pair<size_t, size_t>> spans;
  // Whether the two hold contents at one step.
  bool meets(const Lifetime& other) const;
};
std::vector<Lifetime> lifetimes(const Schedule& schedule, const std::vector<TensorInfo>& tensors,
                                const std::vector<int>& kept = {});

// Offsets in a shared buffer are multiples of this: cuDNN and cuBLASLt want 16-byte aligned
// operands, vectorised kernels 16; 256 is what cudaMalloc gives every allocation.
inline constexpr size_t kPlanAlignment = 256;

// naive_plan, but the tensors that live within one step share bytes where their lifetimes do not
// meet: one arena per memory category, placed greedily by size (largest first, each at the
// lowest aligned offset clear of every placed tensor whose lifetime meets its own), as the arena
// planners of TFLite and ggml do. Tensors held over the whole schedule keep buffers of their own.
MemoryPlan reuse_plan(const Schedule& schedule, const std::vector<TensorInfo>& tensors,
                      const std::vector<int>& kept = {});

// The most bytes the plan's buffers hold at once, per category (each category's own peak), and
// of the device's categories together (host-swap memory is not the device's, as the allocator's
// total leaves it out): a sweep over the buffers' step ranges.
struct PlanPeaks {
  std::array<size_t, kNumMemCategories> by_category{};
  size_t total = 0;
};
PlanPeaks plan_peaks(const MemoryPlan& plan);

}  // namespace dlb
