// Swapping (--swap; vDNN, Rhu et al. 2016; TensorFlow Large Model Support, Le et al. 2018): a
// transformation of the step's schedule. An activation that forward writes and backward reads
// again waits in host memory in between: after its last use in forward it is copied out on the
// copy lane, and ahead of the pass after forward (the loss, backward) that next reads it, copied
// back in. Its device
// bytes then hold nothing over the gap, and a memory plan that shares bytes between tensors
// whose lifetimes do not meet (reuse_plan) gives them to other tensors there.
//
// For an activation y whose last access by the end of forward is pass a, and first after it
// pass b:
//   a, swap_out y (copy lane), c1, swap_wait y, ..., swap_in y (copy lane), c2, swap_wait y, b
// where c1 is the first compute pass after a and c2 the last one before b: each copy overlaps
// one pass of compute (vDNN's one layer of prefetch), and the waits are where the compute lane
// needs it. The first wait holds y's device bytes until the copy out has read them; the second
// makes the copy back in visible before b reads it. Each swapped activation gets a host copy
// (TensorKind::kSwapped, MemCategory::kHostSwap), step-local, so host copies share host bytes
// where their lifetimes do not meet too.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/nn/memory_plan.h"
#include "runtime/nn/schedule.h"

namespace dlb {

// Which activations are swapped: none; every candidate (vDNN's "all"); the largest until the plan
// fits the memory budget (auto, vDNN's "dyn" by another rule); or the ones named.
struct SwapPolicy {
  enum class Kind { kNone, kAll, kAuto, kList };
  Kind kind = Kind::kNone;
  std::vector<std::string> names;  // kList: the tensors to swap, by name
  bool operator==(const SwapPolicy& o) const { return kind == o.kind && names == o.names; }
};

// "none", "all", "auto", or a comma-separated list of tensor names
// ("layer1.0.conv1,layer1.0.bn1"); nullopt for an empty name in a list, or a name given twice.
std::optional<SwapPolicy> parse_swap(std::string_view text);
std::string swap_name(const SwapPolicy& policy);  // the text parse_swap reads

// The tensors that can be swapped, largest first (ties: table order): stored activations and
// saved tensors (not views) that are accessed by the end of forward (its last forward pass) and
// read again after it, where the first access after it reads them (a recomputed tensor is
// written again instead), that are not `kept` (read after the step), and whose device bytes
// their swap frees over at least one compute pass: one strictly between the pass their copy out
// overlaps and the pass their copy in overlaps.
std::vector<int> swap_candidates(const Schedule& schedule, const std::vector<TensorInfo>& tensors,
                                 const std::vector<int>& kept = {});

// The tensors a kList policy names, in its order. Throws InvalidArgument for a name that is no
// tensor of the step, or one that cannot be swapped (saying why, and naming some that can).
std::vector<int> named_swaps(const SwapPolicy& policy, const Schedule& schedule,
                             const std::vector<TensorInfo>& tensors,
                             const std::vector<int>& kept = {});

// A schedule with swaps in it, and the host copies it declares: host copy k is tensor
// tensors.size() + k of the table they extend.
struct SwappedSchedule {
  Schedule schedule;
  std::vector<TensorInfo> host_copies;
};

// `schedule` with each of `swapped` (candidates, in any order) swapped as above, and its
// dependencies linked again. Nothing swapped: the schedule as it is.
SwappedSchedule swap_schedule(const Schedule& schedule, const std::vector<TensorInfo>& tensors,
                              const std::vector<int>& swapped);

// `tensors` and then `host_copies`: the table a swapped schedule is over.
std::vector<TensorInfo> with_host_copies(std::vector<TensorInfo> tensors,
                                         const std::vector<TensorInfo>& host_copies);

// What --swap=auto swaps: candidates, largest first, until the reuse plan of the swapped
// schedule allocates at most `budget` device bytes (MemoryPlan::device_bytes: binding allocates
// every buffer for the step); every candidate when no prefix of them gets there. Only the plan's
// tensors count: a backend's workspace is not in the plan (the trainer's layers' plans reserve it
// first, and the budget given is what is left), nor is scratch an op takes mid-step.
std::vector<int> auto_swaps(const Schedule& schedule, const std::vector<TensorInfo>& tensors,
                            size_t budget, const std::vector<int>& kept = {});

// What is wrong with the copies of a swapped schedule stored as `plan` places it (over the
// table with the host copies): for each copy, every pass between it and the wait that follows
// it may run at the same time as the copy, so none of them may write the bytes a copy out reads,
// nor read or write the bytes a copy in writes; and each copy has a wait after it. Bytes are
// the plan's: the tensor's buffer and offset, its view's too.
std::vector<std::string> check_swaps(const Schedule& schedule,
                                     const std::vector<TensorInfo>& tensors,
                                     const MemoryPlan& plan);

}  // namespace dlb
