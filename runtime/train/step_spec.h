// Every choice that shapes a training step, and the one place that says which go together
// (docs/architecture.md, "Seams": StepSpec). The harness checks a run's options through it before
// anything is built, the Trainer checks its configuration through it before it declares a
// tensor, and the simulator checks each point it models through it: a rule is written once, in
// the options' words, so the message is the same whoever asks.
#pragma once
#include <cstdint>
#include <optional>

#include "runtime/core/dtype.h"
#include "runtime/nn/memory_plan.h"
#include "runtime/nn/recompute.h"
#include "runtime/nn/swap.h"
#include "runtime/overlap/bucket_plan.h"
#include "runtime/overlap/strategy.h"

namespace dlb {

struct StepSpec {
  Precision precision = Precision::kFp32;
  // How the step's tensors are stored (runtime/nn/memory_plan.h). The runtime's own default is
  // the plain one; a run's (reuse) is the harness's choice (suites/harness/core/run_options.h).
  MemoryPlanKind memory_plan = MemoryPlanKind::kNaive;
  RecomputePolicy recompute;  // runtime/nn/recompute.h
  SwapPolicy swap;            // runtime/nn/swap.h
  SyncMode sync;              // sync, stale:K, async or independent (runtime/overlap/strategy.h)
  OverlapStrategy overlap = OverlapStrategy::kNone;
  double bucket_mb = kDefaultBucketMb;
  int64_t ranks = 1;
  // Steps replayed from a captured graph (--cuda-graph; Backend::begin_capture): the first
  // step runs op by op, making every plan, workspace and library state the step needs; the next
  // is captured, and every step from then on replays it, one graph per input buffer. What
  // changes between steps is read from the device: the step counter (dropout's draws), the
  // loss-scale state. Needs a backend that captures and one rank; no tracer, no mid-step hook.
  bool capture = false;
  // Red zones around every buffer (--memory-guard), and the memory budget (--memory-budget):
  // what the step's memory is checked against.
  bool memory_guard = false;
  std::optional<size_t> memory_budget;

  bool async() const { return sync.kind == SyncMode::Kind::kAsync; }
  bool independent() const { return sync.kind == SyncMode::Kind::kIndependent; }
  // Bounded staleness's K; 0 without it.
  int64_t staleness() const { return sync.kind == SyncMode::Kind::kStale ? sync.staleness : 0; }
  // Throws InvalidArgument (or Unsupported, for what dlbench does not build) naming the first
  // choice that does not go with the others.
  void validate() const;
};

}  // namespace dlb
