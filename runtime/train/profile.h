// The per-layer profile of a run: for every layer, the median over the traced steps of its
// forward, backward-data and backward-weights times (or its one fused backward: batch norm's),
// with its gradient bytes and forward FLOPs.
// It is the calibration input of the performance model.
#pragma once
#include <nlohmann/json.hpp>

#include "runtime/nn/graph.h"
#include "runtime/trace/tracer.h"

namespace dlb {

nlohmann::json layer_profile(const Graph& graph, const Tracer& tracer);

}  // namespace dlb
