// Runs a schedule on the graph's backend, in list order (a valid order of its dependencies).
// Layer passes go to the graph, the loss to the trainer, all-reduces and updates to the sync
// policy. Each layer pass and the loss is one trace scope (an NVTX range, and a span on the
// compute lane inside the trace window); the sync policy records its own spans.
#pragma once
#include <functional>

#include "runtime/nn/graph.h"
#include "runtime/nn/schedule.h"
#include "runtime/overlap/grad_sync.h"

namespace dlb {

class Executor {
 public:
  using LossFn = std::function<void(const LayerContext&)>;
  Executor(Graph& graph, Schedule schedule, GradSync& sync, LossFn loss);
  void run(const LayerContext& ctx);
  const Schedule& schedule() const { return schedule_; }

 private:
  Graph& graph_;
  Schedule schedule_;
  GradSync& sync_;
  LossFn loss_;
};

}  // namespace dlb
