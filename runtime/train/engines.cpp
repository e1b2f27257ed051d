#include "runtime/train/engines.h"

#include <fmt/format.h>

#include <algorithm>

namespace dlb {

std::vector<EngineUse> engine_uses(const Graph& graph) {
  std::vector<EngineUse> out;
  for (const auto& node : graph.nodes()) {
    if (!node.layer) continue;
    for (const PassAlgorithm& a : node.layer->algorithms()) out.push_back({node.name, a});
  }
  return out;
}

EngineSummary summarize_engines(const std::vector<EngineUse>& uses, Precision math) {
  EngineSummary s;
  for (const EngineUse& u : uses) {
    const std::optional<EngineNotes>& n = u.algorithm.notes;
    if (!n) continue;
    ++s.passes;
    s.tensor_core += n->tensor_core;
    s.fallback += n->fallback;
    s.down_convert_inputs += n->down_convert_inputs;
    s.reduced_precision_reduction += n->reduced_precision_reduction;
    s.nondeterministic += n->nondeterministic;
    if (lacks_tensor_cores(u.algorithm, math)) {
      s.without_tensor_cores.push_back(
          fmt::format("{} {}: {}{}", u.layer, conv_pass_name(u.algorithm.pass),
                      u.algorithm.algorithm, n->fallback ? " (fallback)" : ""));
    }
  }
  return s;
}

nlohmann::json engines_json(const EngineSummary& s) {
  const size_t listed = std::min(s.without_tensor_cores.size(), kListedPasses);
  return {{"passes", s.passes},
          {"tensor_core", s.tensor_core},
          {"fallback", s.fallback},
          {"down_convert_inputs", s.down_convert_inputs},
          {"reduced_precision_reduction", s.reduced_precision_reduction},
          {"nondeterministic", s.nondeterministic},
          {"without_tensor_cores", s.without_tensor_cores.size()},
          {"passes_without_tensor_cores",
           std::vector<std::string>(
               s.without_tensor_cores.begin(),
               s.without_tensor_cores.begin() + static_cast<std::ptrdiff_t>(listed))}};
}

nlohmann::json pass_algorithm_json(const PassAlgorithm& a) {
  nlohmann::json j = {{"pass", std::string(conv_pass_name(a.pass))},
                      {"algorithm", a.algorithm},
                      {"workspace_bytes", a.workspace_bytes},
                      // made for an earlier layer of the same shape, and shared
                      {"plan_shared", a.shared}};
  if (a.notes) j["engine_notes"] = engine_note_names(*a.notes);
  return j;
}

}  // namespace dlb
