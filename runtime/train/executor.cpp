#include "runtime/train/executor.h"

namespace dlb {

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
  }
}

}  // namespace dlb
