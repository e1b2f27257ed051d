#include "suites/harness/run/step_dump.h"

#include <nlohmann/json.hpp>

#include "runtime/io/safetensors.h"

namespace dlb {
namespace {

// A channels-last tensor's bytes in NCHW order (2- or 4-byte elements).
HostTensor logical_order(Backend& backend, const Tensor& t) {
  HostTensor h = to_host(backend, t);
  if (t.layout() != Layout::kNHWC || t.shape().rank() != 4) return h;
  const Shape& s = t.shape();
  const size_t e = dtype_size(t.dtype());
  const auto n = static_cast<size_t>(s[0]), c = static_cast<size_t>(s[1]),
             hh = static_cast<size_t>(s[2]), w = static_cast<size_t>(s[3]);
  std::vector<uint8_t> out(h.bytes.size());
  for (size_t i = 0; i < n; ++i)
    for (size_t y = 0; y < hh; ++y)
      for (size_t x = 0; x < w; ++x)
        for (size_t ch = 0; ch < c; ++ch) {
          const size_t from = (((i * hh + y) * w + x) * c + ch) * e;
          const size_t to = (((i * c + ch) * hh + y) * w + x) * e;
          std::copy(h.bytes.begin() + from, h.bytes.begin() + from + e, out.begin() + to);
        }
  h.bytes = std::move(out);
  return h;
}

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

void dump_step(const std::string& path, Backend& backend, Graph& graph,
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
    out[info.name] = logical_order(backend, graph.tensor(static_cast<int>(id)));
  }
  save_safetensors(path, out, {{"dlbench.graph", graph_json(graph).dump()}});
}

}  // namespace dlb
