#include "runtime/train/executor.h"

#include <fmt/format.h>

namespace dlb {

namespace {
// A pass as a message names it: "backward_data of layer1.0.conv1", "all-reduce of bucket 3".
std::string describe(const Graph& graph, const Step& step) {
  switch (step.pass) {
    case Pass::kLoss:
      return "the loss";
    case Pass::kAllReduce:
    case Pass::kUpdate:
      return fmt::format("{} of bucket {}", pass_name(step.pass), step.bucket);
    default:
      return fmt::format("{} of {}", pass_name(step.pass), graph.nodes()[step.node].name);
  }
}
}  // namespace

Executor::Executor(Graph& graph, Schedule schedule, GradSync& sync, LossFn loss)
    : graph_(graph), schedule_(std::move(schedule)), sync_(sync), loss_(std::move(loss)) {}

void Executor::run(const LayerContext& ctx) {
  static const std::string kLoss = "loss";
  for (const Step& step : schedule_.steps) {
    switch (step.pass) {
      case Pass::kForward:
      case Pass::kBackwardData:
      case Pass::kBackwardWeights:
      case Pass::kBackward:
      case Pass::kAccumulate: {
        {
          TraceScope scope(ctx.tracer, graph_.nodes()[step.node].name, pass_name(step.pass));
          graph_.run(step, ctx);
        }
        // Reductions in flight progress between backward passes (MPI's only progress in poll
        // mode); completed ones get their spans.
        if (step.pass != Pass::kForward && sync_.distributed()) sync_.poll();
        break;
      }
      case Pass::kLoss: {
        TraceScope scope(ctx.tracer, kLoss, pass_name(step.pass));
        loss_(ctx);
        break;
      }
      case Pass::kAllReduce:
        sync_.all_reduce(step.bucket);
        break;
      case Pass::kUpdate:
        sync_.update(step.bucket, step.from_previous_step);
        break;
    }
    // --memory-guard: every zone read back after every pass (on a GPU, once the pass has run).
    if (ctx.backend.allocator().guarded()) {
      ctx.backend.allocator().check_guards(describe(graph_, step));
    }
  }
}

}  // namespace dlb
