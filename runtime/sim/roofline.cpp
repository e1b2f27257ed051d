#include "runtime/sim/roofline.h"

#include <algorithm>
#include <set>
#include <utility>

namespace dlb {

namespace {

double pass_ms(double flops, double bytes, const DevicePeaks& p) {
  return 1e3 * std::max(flops / p.flops_per_s, bytes / p.bytes_per_s);
}

}  // namespace

double RooflineTimes::step_ms() const {
  double sum = loss_ms + optimizer_ms;
  for (const LayerTimes& t : layers) {
    sum += t.forward_ms + t.backward_data_ms + t.backward_weights_ms + t.backward_ms;
  }
  return sum;
}

RooflineTimes roofline_times(const Graph& graph, const DevicePeaks& peaks) {
  const PrecisionPolicy& policy = graph.policy();
  const double param = static_cast<double>(dtype_size(policy.compute_weights));
  const double grad = static_cast<double>(dtype_size(policy.gradients));
  // The backward passes each layer runs (none into the input image).
  std::set<std::pair<int, Pass>> runs;
  for (const Step& st : graph.backward_schedule().steps) runs.insert({st.node, st.pass});
  RooflineTimes out;
  double params = 0;
  const auto& nodes = graph.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto& node = nodes[i];
    if (!node.layer) continue;
    LayerTimes t;
    t.name = node.name;
    params += static_cast<double>(node.layer->num_params());
    if (graph.runs_no_pass(static_cast<int>(i))) {  // a view, a fused ReLU: no pass
      out.layers.push_back(t);
      continue;
    }
    std::vector<Shape> in;
    double in_bytes = 0;
    for (int x : node.inputs) {
      in.push_back(graph.shape(x));
      in_bytes += static_cast<double>(graph.tensor_infos()[graph.output_id(x)].bytes());
    }
    const double out_bytes =
        static_cast<double>(graph.tensor_infos()[graph.output_id(static_cast<int>(i))].bytes());
    const double flops = node.layer->forward_flops(in);
    const double weights = static_cast<double>(node.layer->num_params()) * param;
    const double grads = static_cast<double>(node.layer->num_params()) * grad;
    t.forward_ms = pass_ms(flops, in_bytes + out_bytes + weights, peaks);
    t.recompute_ms = t.forward_ms;
    const int n = static_cast<int>(i);
    if (runs.count({n, Pass::kBackward})) {
      t.backward_ms = pass_ms(2 * flops, 2 * (in_bytes + out_bytes) + weights + grads, peaks);
    }
    if (runs.count({n, Pass::kBackwardData})) {
      t.backward_data_ms = pass_ms(flops, out_bytes + in_bytes + weights, peaks);
    }
    if (runs.count({n, Pass::kBackwardWeights})) {
      t.backward_weights_ms = pass_ms(flops, out_bytes + in_bytes + grads, peaks);
    }
    out.layers.push_back(t);
  }
  const double logits =
      static_cast<double>(graph.tensor_infos()[graph.output_id(graph.output())].bytes());
  // Forward and backward of softmax cross-entropy: the logits read twice, written once as
  // probabilities and once as their gradient.
  out.loss_ms = pass_ms(0, 4 * logits, peaks);
  const double master = static_cast<double>(dtype_size(policy.master_weights));
  const double state = static_cast<double>(dtype_size(policy.optimizer_state));
  out.optimizer_ms = pass_ms(2 * params, params * (2 * master + grad + 2 * state), peaks);
  return out;
}

}  // namespace dlb
