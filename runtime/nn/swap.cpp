#include "runtime/nn/swap.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <set>

#include "runtime/core/error.h"

namespace dlb {

std::optional<SwapPolicy> parse_swap(std::string_view text) {
  if (text == "none") return SwapPolicy{};
  if (text == "all") return SwapPolicy{SwapPolicy::Kind::kAll, {}};
  if (text == "auto") return SwapPolicy{SwapPolicy::Kind::kAuto, {}};
  SwapPolicy p{SwapPolicy::Kind::kList, {}};
  std::set<std::string, std::less<>> seen;
  size_t from = 0;
  while (true) {
    const size_t comma = std::min(text.find(',', from), text.size());
    const std::string_view name = text.substr(from, comma - from);
    if (name.empty() || !seen.insert(std::string(name)).second) return std::nullopt;
    p.names.emplace_back(name);
    if (comma == text.size()) return p;
    from = comma + 1;
  }
}

std::string swap_name(const SwapPolicy& p) {
  switch (p.kind) {
    case SwapPolicy::Kind::kNone:
      return "none";
    case SwapPolicy::Kind::kAll:
      return "all";
    case SwapPolicy::Kind::kAuto:
      return "auto";
    case SwapPolicy::Kind::kList:
      return fmt::format("{}", fmt::join(p.names, ","));
  }
  return "?";
}

namespace {

constexpr size_t kNone = std::numeric_limits<size_t>::max();

// Per stored tensor: its last access up to the end of forward (a), its first after it (b), and
// whether that first access reads it; the first compute pass after a (c1) and the last before b
// (c2), which its copies overlap.
struct Gap {
  size_t a = kNone, b = kNone, c1 = kNone, c2 = kNone;
  bool b_reads = false;
  bool frees = false;  // a compute pass runs between c1 and c2, without its bytes
};

// The last forward pass: what comes after it (the loss, backward) is where swapped activations
// come back.
size_t forward_end(const Schedule& s) {
  for (size_t i = s.steps.size(); i-- > 0;)
    if (s.steps[i].pass == Pass::kForward) return i;
  return kNone;
}

// The first pass on the compute lane in (from, to); kNone if there is none.
size_t first_compute(const std::vector<Step>& steps, size_t from, size_t to) {
  for (size_t i = from + 1; i < to; ++i)
    if (steps[i].lane == Lane::kCompute) return i;
  return kNone;
}

// The last pass on the compute lane in (from, to); kNone if there is none.
size_t last_compute(const std::vector<Step>& steps, size_t from, size_t to) {
  for (size_t i = to; i-- > from + 1;)
    if (steps[i].lane == Lane::kCompute) return i;
  return kNone;
}

std::vector<Gap> gaps(const Schedule& s, const std::vector<TensorInfo>& tensors) {
  std::vector<Gap> g(tensors.size());
  const size_t end = forward_end(s);
  if (end == kNone) return g;
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step& step = s.steps[i];
    for (const std::vector<int>* ids : {&step.reads, &step.writes}) {
      for (int t : *ids) {
        Gap& gap = g[storage_of(t, tensors)];
        if (i <= end) {
          gap.a = i;
        } else if (gap.b == kNone) {
          gap.b = i;
          gap.b_reads = ids == &step.reads;
        }
      }
    }
  }
  for (Gap& gap : g) {
    if (gap.a == kNone || gap.b == kNone) continue;
    gap.c1 = first_compute(s.steps, gap.a, gap.b);
    if (gap.c1 != kNone) gap.c2 = last_compute(s.steps, gap.c1, gap.b);
    gap.frees = gap.c2 != kNone && first_compute(s.steps, gap.c1, gap.c2) != kNone;
  }
  return g;
}

bool swappable_kind(TensorKind k) {
  return k == TensorKind::kActivation || k == TensorKind::kSaved;
}

// Why tensor `t` (a storage) cannot be swapped; empty if it can.
std::string why_not(int t, const std::vector<Gap>& g, const std::vector<TensorInfo>& tensors,
                    const std::vector<int>& kept) {
  const TensorInfo& info = tensors[t];
  if (!swappable_kind(info.kind)) {
    return fmt::format("it is a {} tensor, and only activations and saved tensors are swapped",
                       tensor_kind_name(info.kind));
  }
  for (int k : kept)
    if (storage_of(k, tensors) == t) return "it is read after the step (the logits)";
  if (info.bytes() == 0) return "it has no bytes";
  const Gap& gap = g[t];
  if (gap.a == kNone || gap.b == kNone) return "nothing after forward reads it again";
  if (!gap.b_reads) return "backward writes it again before reading it (it is recomputed)";
  // Its device bytes are free from the wait after the pass its copy out overlaps (c1) to its
  // copy in, before the pass its copy in overlaps (c2): only if a compute pass is between.
  if (!gap.frees) {
    return "too few passes between its last use in forward and its next use for a copy out and "
           "a copy in to free its bytes";
  }
  return {};
}

Step swap_step(Pass pass, int device, int host, const std::vector<TensorInfo>& tensors) {
  Step s;
  s.pass = pass;
  s.lane = pass == Pass::kSwapWait ? Lane::kCompute : Lane::kCopy;
  s.join = pass == Pass::kSwapWait ? Join::kLanes : Join::kNone;  // compute after the copy
  s.node = tensors[device].node;
  s.y = device;
  s.x = {host};
  switch (pass) {
    case Pass::kSwapOut:
      s.reads = {device};
      s.writes = {host};
      break;
    case Pass::kSwapIn:
      s.reads = {host};
      s.writes = {device};
      break;
    default:
      // Reading both holds their bytes to here. A wait that follows a copy in also counts as
      // writing the activation: the copy's bytes are the compute lane's from here on, so the
      // dependency edges run from it to the readers.
      s.reads = {device, host};
      break;
  }
  return s;
}

}  // namespace

std::vector<int> swap_candidates(const Schedule& schedule, const std::vector<TensorInfo>& tensors,
                                 const std::vector<int>& kept) {
  const std::vector<Gap> g = gaps(schedule, tensors);
  std::vector<int> out;
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (tensors[t].alias_of >= 0) continue;
    if (why_not(static_cast<int>(t), g, tensors, kept).empty()) out.push_back(static_cast<int>(t));
  }
  std::stable_sort(out.begin(), out.end(),
                   [&](int a, int b) { return tensors[a].bytes() > tensors[b].bytes(); });
  return out;
}

std::vector<int> named_swaps(const SwapPolicy& policy, const Schedule& schedule,
                             const std::vector<TensorInfo>& tensors, const std::vector<int>& kept) {
  const std::vector<Gap> g = gaps(schedule, tensors);
  std::vector<int> out;
  for (const std::string& name : policy.names) {
    auto it = std::find_if(tensors.begin(), tensors.end(),
                           [&](const TensorInfo& t) { return t.name == name; });
    if (it == tensors.end()) {
      const std::vector<int> can = swap_candidates(schedule, tensors, kept);
      std::vector<std::string> some;
      for (size_t k = 0; k < can.size() && k < 5; ++k) some.push_back(tensors[can[k]].name);
      throw InvalidArgument(fmt::format(
          "--swap: the step has no tensor named '{}' (of the {} that can be swapped, the largest: "
          "{})",
          name, can.size(), fmt::join(some, ", ")));
    }
    // A view (a fused ReLU's output, a flatten's) is swapped as the tensor it views.
    const int t = storage_of(static_cast<int>(it - tensors.begin()), tensors);
    const std::string why = why_not(t, g, tensors, kept);
    if (!why.empty())
      throw InvalidArgument(fmt::format("--swap: '{}' cannot be swapped: {}", name, why));
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  }
  return out;
}

SwappedSchedule swap_schedule(const Schedule& schedule, const std::vector<TensorInfo>& tensors,
                              const std::vector<int>& swapped) {
  if (swapped.empty()) return {schedule, {}};
  const std::vector<Step>& steps = schedule.steps;
  const std::vector<Gap> g = gaps(schedule, tensors);
  // Per pass of `schedule`: the copies in and the waits that go just before it, and what goes
  // just after it.
  std::vector<std::vector<Step>> before(steps.size()), waits_before(steps.size()),
      after(steps.size());
  SwappedSchedule out;
  for (size_t k = 0; k < swapped.size(); ++k) {
    const int y = swapped[k];
    const Gap& gap = g[y];
    if (tensors[y].alias_of >= 0 || !gap.b_reads || !gap.frees) {
      throw InvalidArgument(
          fmt::format("swap_schedule: '{}' is not a swap candidate", tensors[y].name));
    }
    const TensorInfo& info = tensors[y];
    TensorInfo host{
        info.name + " (host copy)", TensorKind::kSwapped, info.shape, info.dtype, info.node, -1,
        MemCategory::kHostSwap,     info.layout};
    const int h = static_cast<int>(tensors.size() + out.host_copies.size());
    out.host_copies.push_back(std::move(host));
    after[gap.a].push_back(swap_step(Pass::kSwapOut, y, h, tensors));
    after[gap.c1].push_back(swap_step(Pass::kSwapWait, y, h, tensors));
    before[gap.c2].push_back(swap_step(Pass::kSwapIn, y, h, tensors));
    Step in_wait = swap_step(Pass::kSwapWait, y, h, tensors);
    in_wait.writes = {y};
    waits_before[gap.b].push_back(std::move(in_wait));
  }
  // Before a pass: copies in, then waits for copies in; after it: copies out, then waits for
  // copies out.
  for (size_t i = 0; i < steps.size(); ++i) {
    for (auto* group : {&before[i], &waits_before[i]})
      for (Step& s : *group) out.schedule.steps.push_back(std::move(s));
    out.schedule.steps.push_back(steps[i]);
    std::stable_partition(after[i].begin(), after[i].end(),
                          [](const Step& s) { return s.pass == Pass::kSwapOut; });
    for (Step& s : after[i]) out.schedule.steps.push_back(std::move(s));
  }
  link_dependencies(out.schedule, with_host_copies(tensors, out.host_copies));
  return out;
}

std::vector<TensorInfo> with_host_copies(std::vector<TensorInfo> tensors,
                                         const std::vector<TensorInfo>& host_copies) {
  tensors.insert(tensors.end(), host_copies.begin(), host_copies.end());
  return tensors;
}

std::vector<int> auto_swaps(const Schedule& schedule, const std::vector<TensorInfo>& tensors,
                            size_t budget, const std::vector<int>& kept) {
  const std::vector<int> candidates = swap_candidates(schedule, tensors, kept);
  for (size_t n = 0; n <= candidates.size(); ++n) {
    const std::vector<int> chosen(candidates.begin(), candidates.begin() + n);
    const SwappedSchedule s = swap_schedule(schedule, tensors, chosen);
    const MemoryPlan plan = reuse_plan(s.schedule, with_host_copies(tensors, s.host_copies), kept);
    // Binding allocates every buffer for the whole step: all of them count at once.
    if (plan.device_bytes() <= budget) return chosen;
  }
  return candidates;
}

namespace {

// Where a tensor's bytes are in a plan: its storage's buffer and range (a view is given its
// whole storage's range, which holds it).
struct Bytes {
  int buffer = -1;
  size_t begin = 0, end = 0;
  bool overlaps(const Bytes& o) const {
    return buffer == o.buffer && begin < o.end && o.begin < end;
  }
};

Bytes bytes_of(int t, const std::vector<TensorInfo>& tensors, const MemoryPlan& plan) {
  const int s = storage_of(t, tensors);
  const size_t at = plan.offset_of[s];
  return {plan.buffer_of[s], at, at + tensors[s].bytes()};
}

// The first of `ids` whose bytes overlap `b`; -1 if none does.
int touching(const std::vector<int>& ids, const Bytes& b, const std::vector<TensorInfo>& tensors,
             const MemoryPlan& plan) {
  for (int t : ids)
    if (bytes_of(t, tensors, plan).overlaps(b)) return t;
  return -1;
}

}  // namespace

std::vector<std::string> check_swaps(const Schedule& schedule,
                                     const std::vector<TensorInfo>& tensors,
                                     const MemoryPlan& plan) {
  std::vector<std::string> problems;
  const std::vector<Step>& steps = schedule.steps;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& copy = steps[i];
    if (copy.pass != Pass::kSwapOut && copy.pass != Pass::kSwapIn) continue;
    const bool in = copy.pass == Pass::kSwapIn;
    const std::string& name = tensors[copy.y].name;
    const Bytes y = bytes_of(copy.y, tensors, plan);
    size_t j = i + 1;
    for (; j < steps.size(); ++j) {
      const Step& s = steps[j];
      if (s.pass == Pass::kSwapWait && s.y == copy.y) break;
      if (!in && s.pass == Pass::kSwapIn && s.y == copy.y) {
        j = steps.size();  // copied back before its copy out was waited for
        break;
      }
      // The copy queue runs its copies in order. (The comm lane's reductions touch only
      // gradients, which live across steps and share no bytes with a swapped activation.)
      if (s.lane == Lane::kCopy) continue;
      const int w = touching(s.writes, y, tensors, plan);
      const int r = in ? touching(s.reads, y, tensors, plan) : -1;
      if (w >= 0 || r >= 0) {
        problems.push_back(
            fmt::format("{} {} may still be running when pass {} ({}) {} {}, in the same bytes",
                        step_name(copy), name, j, step_name(s), w >= 0 ? "writes" : "reads",
                        tensors[w >= 0 ? w : r].name));
      }
    }
    if (j == steps.size()) {
      problems.push_back(
          fmt::format("{} {} (pass {}) has no wait after it", step_name(copy), name, i));
      continue;
    }
    if (in) continue;
    // Swapped out: nothing reads or writes it until its copy in (its bytes are other tensors').
    for (size_t k = j + 1; k < steps.size(); ++k) {
      const Step& s = steps[k];
      if (s.pass == Pass::kSwapIn && s.y == copy.y) break;
      if (s.lane == Lane::kCopy) continue;
      const bool writes = std::any_of(s.writes.begin(), s.writes.end(),
                                      [&](int t) { return storage_of(t, tensors) == copy.y; });
      if (writes || reads_storage(s, copy.y, tensors)) {
        problems.push_back(fmt::format("pass {} ({}) {} {} while it is swapped out", k,
                                       step_name(s), writes ? "writes" : "reads", name));
      }
    }
  }
  return problems;
}

}  // namespace dlb
