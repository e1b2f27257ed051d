#include "runtime/nn/recompute.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/core/parse_number.h"

namespace dlb {

std::optional<RecomputePolicy> parse_recompute(std::string_view text) {
  if (text == "none") return RecomputePolicy{};
  if (text == "sqrt") return RecomputePolicy{RecomputePolicy::Kind::kSqrt, 0};
  constexpr std::string_view every = "every:";
  if (text.substr(0, every.size()) != every) return std::nullopt;
  const std::optional<int64_t> k =
      parse_whole(text.substr(every.size()), 1, std::numeric_limits<int64_t>::max());
  if (!k) return std::nullopt;
  return RecomputePolicy{RecomputePolicy::Kind::kEvery, *k};
}

std::string recompute_name(const RecomputePolicy& p) {
  switch (p.kind) {
    case RecomputePolicy::Kind::kNone:
      return "none";
    case RecomputePolicy::Kind::kSqrt:
      return "sqrt";
    case RecomputePolicy::Kind::kEvery:
      return "every:" + std::to_string(p.every);
  }
  return "?";
}

std::vector<int64_t> forward_segments(const RecomputePolicy& p, size_t passes) {
  int64_t k = static_cast<int64_t>(std::max<size_t>(passes, 1));  // none: one segment
  if (p.kind == RecomputePolicy::Kind::kEvery) k = p.every;
  if (p.kind == RecomputePolicy::Kind::kSqrt) {
    k = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(passes))));
  }
  std::vector<int64_t> seg(passes);
  for (size_t j = 0; j < passes; ++j) seg[j] = static_cast<int64_t>(j) / std::max<int64_t>(k, 1);
  return seg;
}

namespace {

// The forward passes of a schedule: their indices in it, and the segment of each.
struct ForwardPasses {
  std::vector<size_t> at;
  std::vector<int64_t> segment;
  int64_t segments = 0;
};

// What stays until backward: `kept`, and what a forward pass of another segment reads than the
// one that wrote it (a residual connection across a boundary). Per stored tensor.
std::vector<char> pinned_storage(const std::vector<Step>& steps, const ForwardPasses& f,
                                 const std::vector<TensorInfo>& tensors,
                                 const std::vector<int>& kept) {
  std::vector<int64_t> written_in(tensors.size(), -1);
  for (size_t j = 0; j < f.at.size(); ++j)
    for (int t : steps[f.at[j]].writes) written_in[storage_of(t, tensors)] = f.segment[j];
  std::vector<char> pinned(tensors.size(), 0);
  for (int t : kept) pinned[storage_of(t, tensors)] = 1;
  for (size_t j = 0; j < f.at.size(); ++j) {
    for (int t : steps[f.at[j]].reads) {
      const int s = storage_of(t, tensors);
      if (written_in[s] >= 0 && written_in[s] != f.segment[j]) pinned[s] = 1;
    }
  }
  return pinned;
}

// Per segment but the last, the forward passes it recomputes (indices in the schedule); per
// stored tensor, the segment that recomputes it (-1: none).
struct Recomputed {
  std::vector<std::vector<size_t>> passes;
  std::vector<int64_t> in_segment;
};
Recomputed recomputed_passes(const std::vector<Step>& steps, const ForwardPasses& f,
                             const std::vector<char>& pinned,
                             const std::vector<TensorInfo>& tensors) {
  Recomputed r{std::vector<std::vector<size_t>>(static_cast<size_t>(f.segments - 1)),
               std::vector<int64_t>(tensors.size(), -1)};
  for (size_t j = 0; j < f.at.size(); ++j) {
    const int64_t seg = f.segment[j];
    const bool checkpoint = j + 1 == f.segment.size() || f.segment[j + 1] != seg;
    if (seg == f.segments - 1 || checkpoint) continue;
    const Step& step = steps[f.at[j]];
    if (std::any_of(step.writes.begin(), step.writes.end(),
                    [&](int t) { return pinned[storage_of(t, tensors)] != 0; })) {
      continue;
    }
    r.passes[static_cast<size_t>(seg)].push_back(f.at[j]);
    for (int t : step.writes) r.in_segment[storage_of(t, tensors)] = seg;
  }
  return r;
}

constexpr size_t kNever = std::numeric_limits<size_t>::max();

// Per segment, the pass its recomputation goes just before: the first after the forward passes
// that reads what it dropped (kNever: none does).
std::vector<size_t> insertion_points(const std::vector<Step>& steps, const ForwardPasses& f,
                                     const Recomputed& r, const std::vector<TensorInfo>& tensors) {
  std::vector<size_t> before(r.passes.size(), kNever);
  for (size_t i = f.at.back() + 1; i < steps.size(); ++i) {
    for (int t : steps[i].reads) {
      const int64_t seg = r.in_segment[storage_of(t, tensors)];
      if (seg >= 0 && before[static_cast<size_t>(seg)] == kNever) {
        before[static_cast<size_t>(seg)] = i;
      }
    }
  }
  return before;
}

}  // namespace

Schedule recompute_schedule(const Schedule& schedule, const std::vector<TensorInfo>& tensors,
                            const RecomputePolicy& policy, const std::vector<int>& kept) {
  const std::vector<Step>& steps = schedule.steps;
  ForwardPasses f;
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i].pass == Pass::kForward) f.at.push_back(i);
  f.segment = forward_segments(policy, f.at.size());
  f.segments = f.segment.empty() ? 0 : f.segment.back() + 1;
  if (f.segments <= 1) return schedule;
  const Recomputed r =
      recomputed_passes(steps, f, pinned_storage(steps, f, tensors, kept), tensors);
  const std::vector<size_t> before = insertion_points(steps, f, r, tensors);
  Schedule out;
  for (size_t i = 0; i < steps.size(); ++i) {
    for (size_t seg = 0; seg < r.passes.size(); ++seg) {
      if (before[seg] != i) continue;
      for (size_t p : r.passes[seg]) {
        Step again = steps[p];
        again.pass = Pass::kRecompute;
        out.steps.push_back(std::move(again));
      }
    }
    out.steps.push_back(steps[i]);
  }
  link_dependencies(out, tensors);
  return out;
}

}  // namespace dlb
