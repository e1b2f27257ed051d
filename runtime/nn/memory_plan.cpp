#include "runtime/nn/memory_plan.h"

#include <algorithm>

namespace dlb {

const char* memory_plan_name(MemoryPlanKind k) {
  switch (k) {
    case MemoryPlanKind::kNaive:
      return "naive";
    case MemoryPlanKind::kReuse:
      return "reuse";
    case MemoryPlanKind::kReorder:
      return "reorder";
  }
  return "?";
}

std::optional<MemoryPlanKind> parse_memory_plan(std::string_view s) {
  for (MemoryPlanKind k : kMemoryPlanKinds)
    if (s == memory_plan_name(k)) return k;
  return std::nullopt;
}

size_t MemoryPlan::bytes() const {
  size_t total = 0;
  for (const PlannedBuffer& b : buffers) total += b.bytes;
  return total;
}

size_t MemoryPlan::device_bytes() const {
  size_t total = 0;
  for (const PlannedBuffer& b : buffers)
    if (!is_host_memory(b.category)) total += b.bytes;
  return total;
}

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

namespace {

// Kinds whose contents matter only within one step.
bool step_local(TensorKind k) {
  return k == TensorKind::kActivation || k == TensorKind::kActivationGrad ||
         k == TensorKind::kSaved || k == TensorKind::kScratch || k == TensorKind::kSwapped;
}

size_t aligned(size_t bytes) {
  return (bytes + kPlanAlignment - 1) / kPlanAlignment * kPlanAlignment;
}

// Whether `step` writes all of storage `s` without reading any of it: its earlier contents are
// dead from the last access before.
bool overwrites(const Step& step, int s, int written, const std::vector<TensorInfo>& tensors) {
  if (tensors[written].bytes() != tensors[s].bytes()) return false;  // a part of it
  return !reads_storage(step, s, tensors);
}

}  // namespace

bool Lifetime::meets(const Lifetime& other) const {
  if (first > other.last || other.first > last) return false;
  for (const auto& [a0, a1] : spans)
    for (const auto& [b0, b1] : other.spans)
      if (a0 <= b1 && b0 <= a1) return true;
  return false;
}

std::vector<Lifetime> lifetimes(const Schedule& schedule, const std::vector<TensorInfo>& tensors,
                                const std::vector<int>& kept) {
  const size_t n = tensors.size();
  std::vector<Lifetime> life(n);
  std::vector<bool> seen(n, false), read_first(n, false);
  for (size_t i = 0; i < schedule.steps.size(); ++i) {
    const Step& step = schedule.steps[i];
    // Within a pass, its reads come before its writes: a pass that reads what it writes (an
    // accumulation) reads the earlier contents.
    for (const std::vector<int>* ids : {&step.reads, &step.writes}) {
      for (int t : *ids) {
        const int s = storage_of(t, tensors);
        Lifetime& l = life[s];
        if (!seen[s]) {
          seen[s] = true;
          l.first = i;
          read_first[s] = ids == &step.reads;
          l.spans.push_back({i, i});
        } else if (ids == &step.writes && l.spans.back().second < i &&
                   overwrites(step, s, t, tensors)) {
          l.spans.push_back({i, i});  // what it held is dead since its last access
        }
        l.last = i;
        l.spans.back().second = i;
      }
    }
  }
  const size_t last = schedule.steps.empty() ? 0 : schedule.steps.size() - 1;
  std::vector<bool> keep(n, false);
  for (int t : kept) keep[storage_of(t, tensors)] = true;
  for (size_t t = 0; t < n; ++t) {
    life[t].whole = tensors[t].alias_of >= 0 || !step_local(tensors[t].kind) || !seen[t] ||
                    read_first[t] || keep[t];
    if (life[t].whole) life[t] = {0, last, true, {{0, last}}};
  }
  return life;
}

MemoryPlan reuse_plan(const Schedule& schedule, const std::vector<TensorInfo>& tensors,
                      const std::vector<int>& kept) {
  const std::vector<Lifetime> life = lifetimes(schedule, tensors, kept);
  MemoryPlan plan;
  plan.buffer_of.assign(tensors.size(), -1);
  plan.offset_of.assign(tensors.size(), 0);
  const size_t last = schedule.steps.empty() ? 0 : schedule.steps.size() - 1;
  // Per category, its step-local tensors, largest first (ties: declaration order).
  std::array<std::vector<int>, kNumMemCategories> local;
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (tensors[t].alias_of >= 0) continue;
    if (life[t].whole) {
      plan.buffer_of[t] = static_cast<int>(plan.buffers.size());
      plan.buffers.push_back({tensors[t].name, tensors[t].category, tensors[t].bytes(), 0, last});
    } else {
      local[static_cast<size_t>(tensors[t].category)].push_back(static_cast<int>(t));
    }
  }
  for (size_t c = 0; c < kNumMemCategories; ++c) {
    std::vector<int>& ids = local[c];
    if (ids.empty()) continue;
    std::stable_sort(ids.begin(), ids.end(),
                     [&](int a, int b) { return tensors[a].bytes() > tensors[b].bytes(); });
    struct Placed {
      size_t begin, end;
      const Lifetime* life;
    };
    std::vector<Placed> placed;
    size_t arena = 0, first = last, final = 0;
    const int buffer = static_cast<int>(plan.buffers.size());
    for (int t : ids) {
      const size_t bytes = aligned(tensors[t].bytes());
      const Lifetime& l = life[t];
      // The placed tensors live at the same time as this one, by offset: the lowest gap that
      // holds it.
      std::vector<const Placed*> clash;
      for (const Placed& p : placed)
        if (p.life->meets(l)) clash.push_back(&p);
      std::sort(clash.begin(), clash.end(),
                [](const Placed* a, const Placed* b) { return a->begin < b->begin; });
      size_t at = 0;
      for (const Placed* p : clash) {
        if (at + bytes <= p->begin) break;
        at = std::max(at, p->end);
      }
      placed.push_back({at, at + bytes, &l});
      plan.buffer_of[t] = buffer;
      plan.offset_of[t] = at;
      arena = std::max(arena, at + bytes);
      first = std::min(first, l.first);
      final = std::max(final, l.last);
    }
    plan.buffers.push_back(
        {tensors[ids.front()].name + " and " + std::to_string(ids.size() - 1) + " more (shared)",
         static_cast<MemCategory>(c), arena, first, final});
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
      if (!is_host_memory(static_cast<MemCategory>(c))) total += held[c];
    }
    peaks.total = std::max(peaks.total, total);
  }
  return peaks;
}

}  // namespace dlb
