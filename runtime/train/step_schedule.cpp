#include "runtime/train/step_schedule.h"

#include <utility>

#include "runtime/nn/reorder.h"
#include "runtime/nn/swap.h"

namespace dlb {

LossTensors declare_loss_tensors(Graph& graph, int64_t batch) {
  auto declare = [&](const char* name, TensorKind kind, const Shape& shape, DType dtype,
                     MemCategory category) {
    return graph.declare_tensor(TensorInfo{name, kind, shape, dtype, -1, -1, category});
  };
  LossTensors ids;
  // The labels come with the batch, as the input does.
  ids.labels = declare("labels", TensorKind::kInput, {batch}, DType::kI64, MemCategory::kData);
  ids.probs = declare("softmax probabilities", TensorKind::kLoss, graph.shape(graph.output()),
                      DType::kF32, MemCategory::kActivations);
  ids.loss = declare("loss", TensorKind::kLoss, {1}, DType::kF32, MemCategory::kActivations);
  return ids;
}

std::vector<int> kept_after_step(const Graph& graph) { return {graph.output_id(graph.output())}; }

Schedule compute_schedule(const Graph& graph, const LossTensors& loss, MemoryPlanKind plan,
                          const RecomputePolicy& recompute) {
  Step loss_step;
  loss_step.pass = Pass::kLoss;
  loss_step.node = graph.output();
  loss_step.reads = {graph.output_id(graph.output()), loss.labels};
  loss_step.writes = {graph.grad_id(graph.output()), loss.probs, loss.loss};
  // forward, then the loss (reads the logits and labels, writes the output's gradient), then
  // backward.
  Schedule s = graph.forward_schedule();
  s.steps.push_back(std::move(loss_step));
  const Schedule& backward = graph.backward_schedule();
  s.steps.insert(s.steps.end(), backward.steps.begin(), backward.steps.end());
  const std::vector<int> kept = kept_after_step(graph);
  if (plan == MemoryPlanKind::kReorder) s = reorder_backward(s, graph.tensor_infos(), kept);
  return recompute_schedule(s, graph.tensor_infos(), recompute, kept);
}

Schedule swap_activations(const Schedule& schedule, Graph& graph, const std::vector<int>& swapped) {
  SwappedSchedule s = swap_schedule(schedule, graph.tensor_infos(), swapped);
  for (TensorInfo& host : s.host_copies) graph.declare_tensor(std::move(host));
  return std::move(s.schedule);
}

BucketPlan step_buckets(const Graph& graph, double bucket_mb) {
  std::vector<int64_t> numels;
  for (const ParamIds& p : graph.flat_params()) {
    numels.push_back(graph.tensor_infos()[p.value].shape.numel());
  }
  return make_bucket_plan(graph.grad_offsets(), numels, dtype_size(graph.policy().gradients),
                          bucket_mb);
}

bool loss_scaled(const PrecisionPolicy& policy) { return policy.activations == DType::kF16; }

}  // namespace dlb
