#include "suites/harness/run/step_dump.h"

#include <nlohmann/json.hpp>

#include "runtime/io/safetensors.h"

namespace dlb {
namespace {

nlohmann::json graph_json(const Graph& graph) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const Graph::Node& n : graph.nodes()) {
    nlohmann::json inputs = nlohmann::json::array();
    for (int i : n.inputs) inputs.push_back(graph.nodes()[i].name);
    nodes.push_back({{"name", n.name},
                     {"kind", n.layer ? std::string(n.layer->kind()) : "input"},
                     {"inputs", inputs}});
  }
  return nodes;
}

}  // namespace

void dump_step(const std::string& path, Backend& backend, const Graph& graph, const BoundStep& step,
               const std::vector<TensorInfo>& tensors) {
  StateDict out;
  const std::vector<TensorInfo>& infos = tensors;
  for (size_t id = 0; id < infos.size(); ++id) {
    const TensorInfo& info = infos[id];
    // Views repeat another tensor's bytes (but a parameter's gradient is the flat buffer's slice,
    // and the buffer is only their storage); scratch is a fork's contribution before it was
    // added.
    const bool repeats = info.alias_of >= 0 && info.kind != TensorKind::kParamGrad;
    if (repeats || info.kind == TensorKind::kScratch || info.kind == TensorKind::kGradientBuffer) {
      continue;
    }
    out[info.name] = to_host(backend, step.tensor(static_cast<int>(id)));  // logical order
  }
  save_safetensors(path, out, {{"dlbench.graph", graph_json(graph).dump()}});
}

}  // namespace dlb
