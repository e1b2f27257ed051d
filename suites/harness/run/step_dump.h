// `dlbench run --dump=FILE`: every tensor of the last step, as the step's table names them
// ("layer1.0.conv1", "grad of layer1.0.conv1", "layer1.0.bn1.saved mean",
// "layer1.0.conv1.weight.grad", "probabilities"...), in logical NCHW order whatever the
// backend stores, in one safetensors file whose metadata holds the graph: each node's name,
// layer kind and inputs. tests/parity/model_parity.py checks every pass of a step against
// PyTorch in float64 from it, each pass from the inputs dlbench itself gave it.
#pragma once
#include <string>
#include <vector>

#include "runtime/nn/graph.h"

namespace dlb {

// `tensors`: the step's table (Trainer::tensors()), bound as `step` (Trainer::bound()) with
// `graph`'s tensors first.
void dump_step(const std::string& path, Backend& backend, const Graph& graph, const BoundStep& step,
               const std::vector<TensorInfo>& tensors);

}  // namespace dlb
