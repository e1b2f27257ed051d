// Which engine each convolution pass of a model runs on, and whether that is what its precision
// asked for: a tf32, fp16 or bf16 pass whose engine declares no tensor cores ran on generic
// arithmetic (the 70x of results/device/, which nothing noticed). The record carries the summary
// (metrics.engines), the per-layer profile each pass, and the run warns on the console.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/nn/graph.h"

namespace dlb {

// One pass of one layer, as its plan chose it.
struct EngineUse {
  std::string layer;
  PassAlgorithm algorithm;
};

// What the passes' engines declare, counted. Passes whose backend declares nothing (the CPU's)
// are not counted: a summary of no passes says the backend names no engines.
struct EngineSummary {
  int64_t passes = 0;  // passes whose engine declares its notes
  int64_t tensor_core = 0, fallback = 0, down_convert_inputs = 0, reduced_precision_reduction = 0,
          nondeterministic = 0;
  // "layer1.0.conv1 backward_data: eng0 (fallback)": each pass that computes in `math` tf32, fp16
  // or bf16 on an engine without tensor cores.
  std::vector<std::string> without_tensor_cores;
};

// Every convolution pass of the graph's layers, in graph order.
std::vector<EngineUse> engine_uses(const Graph& graph);
// Pure.
EngineSummary summarize_engines(const std::vector<EngineUse>& uses, Precision math);
// metrics.engines of the record: the counts, and the passes without tensor cores (at most
// kListedPasses of them, with the total count beside).
nlohmann::json engines_json(const EngineSummary& s);
inline constexpr size_t kListedPasses = 64;
// How the convolution passes compute, whatever the backend: how many there are, how many use
// Winograd's transforms (the plan's arithmetic, or a cuDNN engine's winograd note), and those that
// --conv-algo's named algorithm could not run
// ("layer3.0.conv1 forward: why"), which took the heuristic's choice instead.
struct ConvPassSummary {
  int64_t passes = 0, winograd = 0;
  std::vector<std::string> refused;
};
// Pure.
ConvPassSummary summarize_conv_passes(const std::vector<EngineUse>& uses);
// Throws InvalidArgument, naming each layer and why, when --conv-algo=`named` ran on none of the
// passes (a model whose every convolution Winograd refuses).
void require_named_algorithm_ran(const ConvPassSummary& s, std::string_view named);
// metrics.convolutions of the record: the counts, and the first kListedPasses refusals.
nlohmann::json conv_passes_json(const ConvPassSummary& s);

// What the run's multiplications read (metrics.arithmetic): for 16-bit data, the stored 16-bit
// tensors themselves (native: products exact in f32, accumulated in f32), or f32 copies of them
// (emulated: the same products, plus a widening before and a rounding after each op). Batch norm,
// pooling, activations and the optimizer compute in f32 on every backend, as PyTorch's do.
struct ArithmeticSummary {
  DType data = DType::kF32;  // the activations' type
  int64_t conv_passes = 0, native_conv_passes = 0;
  DType matmul = DType::kF32;  // what the linear layers' products read
};
// Pure. `matmul` is Backend::matmul_arithmetic's operands for the run's types.
ArithmeticSummary summarize_arithmetic(const std::vector<EngineUse>& uses, DType data,
                                       DType matmul);
// "f32" (f32 data), "native" (every product reads the 16-bit data), "emulated" (none does), or
// "partly native".
std::string_view arithmetic_verdict(const ArithmeticSummary& s);
nlohmann::json arithmetic_json(const ArithmeticSummary& s);
// The console's line for a 16-bit run: "bf16 products: native (60 of 60 convolution passes,
// matmul native; metrics.arithmetic)", and for any other verdict what computes on f32 copies;
// empty for f32 data.
std::string arithmetic_line(const ArithmeticSummary& s);

// One pass as the per-layer profile lists it: its algorithm, workspace, sharing and notes.
nlohmann::json pass_algorithm_json(const PassAlgorithm& a);

}  // namespace dlb
