#include "runtime/nn/recompute.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace dlb {

std::optional<RecomputePolicy> parse_recompute(std::string_view text) {
  if (text == "none") return RecomputePolicy{};
  if (text == "sqrt") return RecomputePolicy{RecomputePolicy::Kind::kSqrt, 0};
  constexpr std::string_view every = "every:";
  if (text.substr(0, every.size()) != every) return std::nullopt;
  const std::string_view number = text.substr(every.size());
  int64_t k = 0;
  const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), k);
  if (error != std::errc() || end != number.data() + number.size() || number.empty() || k < 1) {
    return std::nullopt;
  }
  return RecomputePolicy{RecomputePolicy::Kind::kEvery, k};
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

int storage_of(int id, const std::vector<TensorInfo>& tensors) {
  while (tensors[id].alias_of >= 0) id = tensors[id].alias_of;
  return id;
}

}  // namespace

Schedule recompute_schedule(const Schedule& schedule, const std::vector<TensorInfo>& tensors,
                            const RecomputePolicy& policy, const std::vector<int>& kept) {
  const std::vector<Step>& steps = schedule.steps;
  std::vector<size_t> forward;  // the forward passes' indices in `steps`
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i].pass == Pass::kForward) forward.push_back(i);
  const std::vector<int64_t> seg_of = forward_segments(policy, forward.size());
  const int64_t segments = seg_of.empty() ? 0 : seg_of.back() + 1;
  if (segments <= 1) return schedule;
  const auto segment = [&](size_t j) { return seg_of[j]; };

  // Which segment writes each stored tensor; what must stay until backward (pinned).
  std::vector<int64_t> written_in(tensors.size(), -1);
  for (size_t j = 0; j < forward.size(); ++j)
    for (int t : steps[forward[j]].writes) written_in[storage_of(t, tensors)] = segment(j);
  std::vector<char> pinned(tensors.size(), 0);
  for (int t : kept) pinned[storage_of(t, tensors)] = 1;
  for (size_t j = 0; j < forward.size(); ++j) {
    for (int t : steps[forward[j]].reads) {
      const int s = storage_of(t, tensors);
      if (written_in[s] >= 0 && written_in[s] != segment(j)) pinned[s] = 1;
    }
  }

  // Per segment but the last, the forward passes it recomputes; per stored tensor, the segment
  // that recomputes it (-1: none).
  std::vector<std::vector<size_t>> again(static_cast<size_t>(segments - 1));
  std::vector<int64_t> recomputed_in(tensors.size(), -1);
  for (size_t j = 0; j < forward.size(); ++j) {
    const int64_t seg = segment(j);
    const bool checkpoint = j + 1 == seg_of.size() || seg_of[j + 1] != seg;
    if (seg == segments - 1 || checkpoint) continue;
    const Step& step = steps[forward[j]];
    if (std::any_of(step.writes.begin(), step.writes.end(),
                    [&](int t) { return pinned[storage_of(t, tensors)] != 0; })) {
      continue;
    }
    again[static_cast<size_t>(seg)].push_back(forward[j]);
    for (int t : step.writes) recomputed_in[storage_of(t, tensors)] = seg;
  }

  // Each segment is recomputed just before the first pass after the forward passes that reads
  // what it dropped.
  constexpr size_t kNever = std::numeric_limits<size_t>::max();
  std::vector<size_t> before(again.size(), kNever);
  for (size_t i = forward.back() + 1; i < steps.size(); ++i) {
    for (int t : steps[i].reads) {
      const int64_t seg = recomputed_in[storage_of(t, tensors)];
      if (seg >= 0 && before[static_cast<size_t>(seg)] == kNever) {
        before[static_cast<size_t>(seg)] = i;
      }
    }
  }

  Schedule out;
  for (size_t i = 0; i < steps.size(); ++i) {
    for (size_t seg = 0; seg < again.size(); ++seg) {
      if (before[seg] != i) continue;
      for (size_t f : again[seg]) {
        Step r = steps[f];
        r.pass = Pass::kRecompute;
        r.after.clear();
        out.steps.push_back(std::move(r));
      }
    }
    out.steps.push_back(steps[i]);
  }
  link_dependencies(out, tensors);
  return out;
}

}  // namespace dlb
