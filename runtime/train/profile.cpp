#include "runtime/train/profile.h"

#include <map>

#include "runtime/core/stats.h"
#include "runtime/train/engines.h"

namespace dlb {

namespace {

// Span durations by (name, category): a pass's, or a swapped tensor's copies.
class SpanTimes {
 public:
  explicit SpanTimes(const Tracer& tracer) {
    for (const Span& s : tracer.spans()) times_[{s.name, s.category}].push_back(s.duration_us);
  }
  // The median in milliseconds; null where no span has that name and category.
  nlohmann::json median_ms(const std::string& name, const char* category) const {
    auto it = times_.find({name, category});
    if (it == times_.end()) return nullptr;
    return percentile(it->second, 50) / 1e3;
  }
  // A swap's copies are named by tensor: a layer's is the sum of its tensors' medians (its
  // output, and what it saves for backward); null where none of them was swapped.
  nlohmann::json swapped_ms(const Graph& graph, int node, const char* category) const {
    double sum = 0;
    bool any = false;
    for (const TensorInfo& t : graph.tensor_infos()) {
      if (t.node != node || t.kind == TensorKind::kSwapped) continue;
      const nlohmann::json ms = median_ms(t.name, category);
      if (ms.is_null()) continue;
      sum += ms.get<double>();
      any = true;
    }
    return any ? nlohmann::json(sum) : nlohmann::json(nullptr);
  }

 private:
  std::map<std::pair<std::string, std::string>, std::vector<double>> times_;
};

}  // namespace

nlohmann::json layer_profile(const Graph& graph, const Tracer& tracer) {
  const SpanTimes times(tracer);
  auto median_ms = [&](const std::string& name, const char* category) {
    return times.median_ms(name, category);
  };
  nlohmann::json layers = nlohmann::json::array();
  const auto& nodes = graph.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto& node = nodes[i];
    if (!node.layer) continue;
    const int fused = graph.fused_into(static_cast<int>(i));
    std::vector<Shape> in;
    for (int i : node.inputs) in.push_back(graph.shape(i));
    nlohmann::json algorithms = nlohmann::json::array();
    for (const PassAlgorithm& a : node.layer->algorithms()) {
      algorithms.push_back(pass_algorithm_json(a));
    }
    layers.push_back(
        {{"name", node.name},
         {"kind", std::string(node.layer->kind())},
         {"view", node.layer->is_view()},
         // A ReLU that the layer before it applies (batch norm + ReLU, fused).
         {"fused_into", fused >= 0 ? nlohmann::json(nodes[fused].name) : nullptr},
         {"output_shape", node.shape.dims()},
         // A view (flatten) or a fused ReLU runs no pass: its output is its
         // input's bytes.
         {"forward_ms", graph.runs_no_pass(static_cast<int>(i)) ? nlohmann::json(0.0)
                                                                : median_ms(node.name, "forward")},
         {"backward_data_ms", median_ms(node.name, "backward_data")},
         {"backward_weights_ms", median_ms(node.name, "backward_weights")},
         // Layers whose data and weight gradients come from one call (batch norm).
         {"backward_ms", median_ms(node.name, "backward")},
         // --recompute: its forward pass run again before backward.
         {"recompute_ms", median_ms(node.name, "recompute")},
         // --swap: the copies of its output and what it saves to host memory and back, on the
         // copy lane.
         {"swap_out_ms", times.swapped_ms(graph, static_cast<int>(i), "swap_out")},
         {"swap_in_ms", times.swapped_ms(graph, static_cast<int>(i), "swap_in")},
         {"grad_bytes",
          node.layer->num_params() * static_cast<int64_t>(dtype_size(graph.policy().gradients))},
         {"forward_flops", node.layer->forward_flops(in)},
         {"algorithms", algorithms}});
  }
  return {{"traced_steps", tracer.traced_steps()}, {"statistic", "median"}, {"layers", layers}};
}

}  // namespace dlb
