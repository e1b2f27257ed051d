#include "runtime/train/engines.h"

#include <fmt/format.h>

#include <algorithm>

#include "runtime/core/error.h"

namespace dlb {

namespace {

// The first kListedPasses of `passes`: what a record names (it counts them all beside).
std::vector<std::string> listed(const std::vector<std::string>& passes) {
  const size_t n = std::min(passes.size(), kListedPasses);
  return {passes.begin(), passes.begin() + static_cast<std::ptrdiff_t>(n)};
}

}  // namespace

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
  return {{"passes", s.passes},
          {"tensor_core", s.tensor_core},
          {"fallback", s.fallback},
          {"down_convert_inputs", s.down_convert_inputs},
          {"reduced_precision_reduction", s.reduced_precision_reduction},
          {"nondeterministic", s.nondeterministic},
          {"without_tensor_cores", s.without_tensor_cores.size()},
          {"passes_without_tensor_cores", listed(s.without_tensor_cores)}};
}

ConvPassSummary summarize_conv_passes(const std::vector<EngineUse>& uses) {
  ConvPassSummary s;
  for (const EngineUse& u : uses) {
    ++s.passes;
    // oneDNN's, whose arithmetic the plan states; a cuDNN engine's notes say it too
    s.winograd += u.algorithm.arithmetic == ConvArithmetic::kWinogradF4x3 ||
                  (u.algorithm.notes && u.algorithm.notes->winograd);
    if (!u.algorithm.refused.empty()) {
      s.refused.push_back(
          fmt::format("{} {}: {}", u.layer, conv_pass_name(u.algorithm.pass), u.algorithm.refused));
    }
  }
  return s;
}

void require_named_algorithm_ran(const ConvPassSummary& s, std::string_view named) {
  if (s.passes == 0 || static_cast<int64_t>(s.refused.size()) < s.passes) return;
  std::string layers;
  for (const std::string& r : s.refused) layers += (layers.empty() ? "" : "; ") + r;
  throw InvalidArgument(
      fmt::format("--conv-algo={} runs none of the model's {} convolution passes: {}", named,
                  s.passes, layers));
}

nlohmann::json conv_passes_json(const ConvPassSummary& s) {
  return {{"passes", s.passes},
          {"winograd", s.winograd},
          {"refused", s.refused.size()},
          {"refused_passes", listed(s.refused)}};
}

ArithmeticSummary summarize_arithmetic(const std::vector<EngineUse>& uses, DType data,
                                       DType matmul) {
  ArithmeticSummary s;
  s.data = data;
  s.matmul = matmul;
  for (const EngineUse& u : uses) {
    ++s.conv_passes;
    s.native_conv_passes += data != DType::kF32 && u.algorithm.products.operands == data;
  }
  return s;
}

std::string_view arithmetic_verdict(const ArithmeticSummary& s) {
  if (s.data == DType::kF32) return "f32";
  const bool matmul = s.matmul == s.data;
  if (s.native_conv_passes == s.conv_passes && matmul) return "native";
  if (s.native_conv_passes == 0 && !matmul) return "emulated";
  return "partly native";
}

nlohmann::json arithmetic_json(const ArithmeticSummary& s) {
  return {{"data", std::string(dtype_name(s.data))},
          {"verdict", std::string(arithmetic_verdict(s))},
          {"convolution_passes", s.conv_passes},
          {"native_convolution_passes", s.native_conv_passes},
          {"matmul", std::string(dtype_name(s.matmul))}};
}

std::string arithmetic_line(const ArithmeticSummary& s) {
  if (s.data == DType::kF32) return "";
  const std::string_view data = dtype_name(s.data), verdict = arithmetic_verdict(s);
  std::string rest;
  if (verdict == "emulated")
    rest = fmt::format(": all compute on f32 copies of the {} tensors", data);
  if (verdict == "partly native") {
    rest = fmt::format(": the rest compute on f32 copies of the {} tensors", data);
  }
  return fmt::format(
      "{} products: {} ({} of {} convolution passes, matmul {}; metrics.arithmetic){}", data,
      verdict, s.native_conv_passes, s.conv_passes, s.matmul == s.data ? "native" : "in f32", rest);
}

nlohmann::json pass_algorithm_json(const PassAlgorithm& a) {
  nlohmann::json j = {{"pass", std::string(conv_pass_name(a.pass))},
                      {"algorithm", a.algorithm},
                      {"workspace_bytes", a.workspace_bytes},
                      // made for an earlier layer of the same shape, and shared
                      {"plan_shared", a.shared}};
  if (a.notes) {
    j["engine_notes"] = engine_note_names(*a.notes);
    j["engine_class"] = std::string(engine_class_name(engine_class(*a.notes)));
  }
  j["arithmetic"] = std::string(conv_arithmetic_name(a.arithmetic));
  j["operands"] = std::string(dtype_name(a.products.operands));
  // --conv-algo named an algorithm that cannot run this pass, which took the heuristic's choice.
  if (!a.refused.empty()) j["refused"] = a.refused;
  return j;
}

}  // namespace dlb
