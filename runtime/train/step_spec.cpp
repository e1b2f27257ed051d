#include "runtime/train/step_spec.h"

#include <fmt/format.h>

#include <cmath>
#include <string>

#include "runtime/core/error.h"

namespace dlb {
namespace {

void check_shape(const StepSpec& s) {
  if (s.ranks < 1)
    throw InvalidArgument(fmt::format("--ranks must be at least 1, got {}", s.ranks));
  if (!(s.bucket_mb > 0) || !std::isfinite(s.bucket_mb)) {
    throw InvalidArgument(fmt::format("--bucket-mb must be above 0, got {}", s.bucket_mb));
  }
}

void check_async(const StepSpec& s) {
  if (!s.async()) return;
  if (s.ranks < 2) {
    throw InvalidArgument(
        "--sync=async needs at least 2 ranks: rank 0 serves the others' gradients as well as "
        "computing its own");
  }
  if (s.overlap != OverlapStrategy::kNone) {
    throw InvalidArgument("--sync=async pushes whole steps' gradients: it takes --overlap=none");
  }
  if (s.precision != Precision::kFp32) {
    throw InvalidArgument(
        "--sync=async keeps fp32 weights and gradients on its parameter server: it needs "
        "--precision=fp32");
  }
}

void check_stale(const StepSpec& s) {
  if (s.staleness() == 0) return;
  const std::string mode = sync_mode_name(s.sync);
  if (s.overlap != OverlapStrategy::kNone) {
    throw InvalidArgument(fmt::format(
        "--sync={} schedules its own all-reduce, behind the next steps: it takes --overlap=none",
        mode));
  }
  if (s.precision == Precision::kFp16) {
    throw InvalidArgument(fmt::format(
        "--sync={}: fp16's loss scaling checks this step's gradients, not the stale ones it "
        "would apply; use bf16 or fp32",
        mode));
  }
  if (s.capture) {
    throw InvalidArgument(
        fmt::format("--sync={}: a captured step (--cuda-graph) cannot rotate its slots (a stale "
                    "step's slot changes with the step; a replay repeats one step's work)",
                    mode));
  }
}

void check_independent(const StepSpec& s) {
  if (s.independent() && s.overlap != OverlapStrategy::kNone) {
    throw InvalidArgument(
        "--sync=independent reduces no gradients, so there is nothing to overlap: it takes "
        "--overlap=none");
  }
}

// Recomputation and swapping free activations' bytes for the plan to reuse.
void check_memory(const StepSpec& s) {
  const bool naive = s.memory_plan == MemoryPlanKind::kNaive;
  if (s.memory_guard && !naive) {
    throw Unsupported(fmt::format(
        "--memory-guard puts red zones around each buffer, and --memory-plan={} packs tensors "
        "into shared buffers, where an overrun lands in a neighbour, not a red zone: guard with "
        "--memory-plan=naive",
        memory_plan_name(s.memory_plan)));
  }
  if (s.recompute.kind != RecomputePolicy::Kind::kNone && naive) {
    throw InvalidArgument(fmt::format(
        "--recompute={} frees activations for the memory plan to reuse, and --memory-plan=naive "
        "keeps every tensor in its own buffer: use --memory-plan=reuse",
        recompute_name(s.recompute)));
  }
  if (s.swap.kind != SwapPolicy::Kind::kNone && naive) {
    throw InvalidArgument(fmt::format(
        "--swap={} frees activations' device bytes for the memory plan to reuse, and "
        "--memory-plan=naive keeps every tensor in its own buffer: use --memory-plan=reuse",
        swap_name(s.swap)));
  }
  if (s.swap.kind == SwapPolicy::Kind::kAuto && !s.memory_budget) {
    throw InvalidArgument(
        "--swap=auto swaps the largest activations until the step fits --memory-budget, and "
        "there is none: give --memory-budget, or name the activations to swap (--swap=A,B)");
  }
}

// A captured step replays fixed work on the compute stream.
void check_capture(const StepSpec& s) {
  if (!s.capture) return;
  if (s.swap.kind != SwapPolicy::Kind::kNone) {
    throw Unsupported(
        "--swap with --cuda-graph: swap copies run on a copy stream of their own, ordered by "
        "events from the compute stream, and dlbench does not capture that stream into the "
        "step's graph: run without --cuda-graph");
  }
  if (s.memory_guard) {
    throw Unsupported(
        "--memory-guard checks memory between the passes of the step, which a replayed CUDA "
        "graph runs as one launch: guard without --cuda-graph");
  }
  if (s.ranks > 1) {
    throw Unsupported(fmt::format(
        "--cuda-graph captures one rank's step; with --ranks={} the all-reduces are driven "
        "from the host between passes, which a replayed graph cannot do",
        s.ranks));
  }
}

}  // namespace

void StepSpec::validate() const {
  check_shape(*this);
  check_async(*this);
  check_stale(*this);
  check_independent(*this);
  check_memory(*this);
  check_capture(*this);
}

}  // namespace dlb
