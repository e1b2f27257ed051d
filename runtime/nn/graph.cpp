#include "runtime/nn/graph.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "runtime/core/error.h"

namespace dlb {

Graph::Graph(Shape input_shape) {
  nodes_.push_back(Node{"input", nullptr, {}, std::move(input_shape), 0});
}

int Graph::add(std::string name, std::unique_ptr<Layer> layer, std::vector<int> inputs) {
  if (is_setup()) throw InvalidArgument("cannot add layers to a graph after setup");
  std::vector<Shape> in;
  for (int i : inputs) {
    if (i < 0 || i >= static_cast<int>(nodes_.size())) {
      throw InvalidArgument(
          fmt::format("node '{}' reads node {}, which does not exist yet", name, i));
    }
    in.push_back(nodes_[i].shape);
  }
  Shape out;
  try {
    out = layer->output_shape(in);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("layer '{}': {}", name, e.what()));
  }
  for (int i : inputs) ++nodes_[i].consumers;
  nodes_.push_back(Node{std::move(name), std::move(layer), std::move(inputs), std::move(out), 0});
  return output();
}

std::vector<Shape> Graph::input_shapes(const Node& n) const {
  std::vector<Shape> in;
  for (int i : n.inputs) in.push_back(nodes_[i].shape);
  return in;
}

void Graph::setup(Backend& backend, Rng& rng) {
  if (is_setup()) throw InvalidArgument("graph is already set up");
  backend_ = &backend;
  const size_t n = nodes_.size();
  outputs_.resize(n);
  grads_.resize(n);
  grad_written_.assign(n, 0);
  outputs_[0] = backend.empty(nodes_[0].shape, DType::kF32, MemCategory::kData, "input batch");
  size_t max_slots = 0;
  for (size_t i = 1; i < n; ++i) {
    Node& node = nodes_[i];
    Rng layer_rng = rng.fork(i);
    node.layer->setup(backend, input_shapes(node), layer_rng);
    outputs_[i] = backend.empty(node.shape, DType::kF32, MemCategory::kActivations,
                                fmt::format("output of {}", node.name));
    grads_[i] = backend.empty(node.shape, DType::kF32, MemCategory::kActivations,
                              fmt::format("gradient of {}", node.name));
    max_slots = std::max(max_slots, node.inputs.size());
  }
  int64_t total = 0;
  for (const Node& node : nodes_)
    if (node.layer) total += node.layer->num_params();
  flat_grads_ = backend.empty({std::max<int64_t>(total, 1)}, DType::kF32, MemCategory::kGradients,
                              "flat gradient buffer");
  int64_t offset = 0;
  for (size_t i = n - 1; i >= 1; --i) {
    for (Param* p : nodes_[i].layer->params()) {
      p->grad = flat_grads_.slice_flat(offset, p->value.numel()).reshaped(p->value.shape());
      offset += p->value.numel();
    }
  }
  if (offset != total) {
    throw InvalidArgument(
        fmt::format("parameters hold {} values, layers declared {}", offset, total));
  }
  node_inputs_.resize(n);
  for (size_t i = 1; i < n; ++i)
    for (int j : nodes_[i].inputs) node_inputs_[i].push_back(&outputs_[j]);
  // A fork's second consumer writes its gradient contribution to scratch, then adds it.
  for (size_t slot = 0; slot < max_slots; ++slot) {
    int64_t largest = 0;
    for (size_t i = 1; i < n; ++i) {
      const Node& node = nodes_[i];
      if (slot < node.inputs.size() && nodes_[node.inputs[slot]].consumers > 1) {
        largest = std::max(largest, nodes_[node.inputs[slot]].shape.numel());
      }
    }
    fork_scratch_.push_back(
        largest ? backend.empty({largest}, DType::kF32, MemCategory::kActivations, "fork gradient")
                : Tensor());
  }
}

void Graph::forward(const LayerContext& ctx) {
  for (size_t i = 1; i < nodes_.size(); ++i) {
    Node& node = nodes_[i];
    if (observer_) observer_->before_forward(static_cast<int>(i));
    TraceScope scope(ctx.tracer, node.name, "forward");
    node.layer->forward(ctx, node_inputs_[i], outputs_[i]);
  }
}

void Graph::backward(const LayerContext& ctx) {
  std::fill(grad_written_.begin(), grad_written_.end(), 0);
  grad_written_[output()] = 1;
  for (int i = output(); i >= 1; --i) {
    Node& node = nodes_[i];
    if (!grad_written_[i]) continue;  // does not reach the loss
    const std::vector<const Tensor*>& in = node_inputs_[i];
    std::vector<Tensor*> dx;
    std::vector<std::pair<Tensor*, Tensor*>> pending_adds;  // (scratch, destination)
    std::vector<Tensor> scratch_views(node.inputs.size());  // stable: never resized
    for (size_t slot = 0; slot < node.inputs.size(); ++slot) {
      const int j = node.inputs[slot];
      if (j == input()) {
        dx.push_back(nullptr);
      } else if (!grad_written_[j]) {
        dx.push_back(&grads_[j]);
        grad_written_[j] = 1;
      } else {
        scratch_views[slot] =
            fork_scratch_[slot].slice_flat(0, nodes_[j].shape.numel()).reshaped(nodes_[j].shape);
        dx.push_back(&scratch_views[slot]);
        pending_adds.emplace_back(&scratch_views[slot], &grads_[j]);
      }
    }
    if (std::any_of(dx.begin(), dx.end(), [](Tensor* t) { return t != nullptr; })) {
      TraceScope scope(ctx.tracer, node.name, "backward_data");
      node.layer->backward_data(ctx, in, outputs_[i], grads_[i], dx);
      for (auto& [from, to] : pending_adds) ctx.backend.accumulate(*from, *to);
    }
    if (node.layer->num_params() > 0) {
      TraceScope scope(ctx.tracer, node.name, "backward_weights");
      node.layer->backward_weights(ctx, in, outputs_[i], grads_[i]);
    }
    if (observer_) observer_->after_backward_node(i);
  }
}

std::vector<Graph::NamedParam> Graph::named_params() {
  std::vector<NamedParam> out;
  for (Node& node : nodes_) {
    if (!node.layer) continue;
    for (Param* p : node.layer->params()) out.push_back({node.name + "." + p->name, p});
  }
  return out;
}

int64_t Graph::num_params() const {
  int64_t total = 0;
  for (const Node& node : nodes_)
    if (node.layer) total += node.layer->num_params();
  return total;
}

StateDict Graph::state_dict() {
  if (!is_setup()) throw InvalidArgument("state_dict of a graph that is not set up");
  StateDict out;
  for (Node& node : nodes_)
    if (node.layer) node.layer->save_state(*backend_, node.name + ".", out);
  return out;
}

void Graph::load_state_dict(const StateDict& state) {
  if (!is_setup()) throw InvalidArgument("load_state_dict on a graph that is not set up");
  std::vector<std::string> used;
  for (Node& node : nodes_)
    if (node.layer) node.layer->load_state(*backend_, node.name + ".", state, used);
  if (used.size() != state.size()) {
    std::sort(used.begin(), used.end());
    std::vector<std::string> unexpected;
    for (const auto& [name, t] : state)
      if (!std::binary_search(used.begin(), used.end(), name)) unexpected.push_back(name);
    throw InvalidArgument(
        fmt::format("unexpected tensors in the state: {}", fmt::join(unexpected, ", ")));
  }
}

double Graph::forward_flops() const {
  double total = 0;
  for (const Node& node : nodes_)
    if (node.layer) total += node.layer->forward_flops(input_shapes(node));
  return total;
}

double Graph::training_flops() const {
  double total = 0;
  for (const Node& node : nodes_) {
    if (!node.layer) continue;
    const double f = node.layer->forward_flops(input_shapes(node));
    total += node.layer->is_matmul_layer() ? 3 * f : f;
  }
  return total;
}

double Graph::matmul_macs() const {
  double total = 0;
  for (const Node& node : nodes_)
    if (node.layer && node.layer->is_matmul_layer())
      total += node.layer->forward_flops(input_shapes(node)) / 2;
  return total;
}

}  // namespace dlb
