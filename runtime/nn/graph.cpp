#include "runtime/nn/graph.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "runtime/core/error.h"
#include "runtime/memory/memory_guard.h"

namespace dlb {

namespace {

// How a tensor of this shape is stored in this layout: a layout means something for 4-D tensors
// only, and every other rank is NCHW (as Backend::empty stores it).
Layout stored(Layout layout, const Shape& shape) {
  return shape.rank() == 4 ? layout : Layout::kNCHW;
}

// A view node's layout: a 4-D view keeps its source's; a flatten's output is 2-D, which is
// row-major, so its source must hold channel-major order: NCHW, or one pixel per channel
// (output_layout sees to it).
Layout view_layout(const TensorInfo& source, const Shape& shape) {
  if (shape.rank() == 4) return source.layout;
  const Shape& s = source.shape;
  if (source.layout == Layout::kNHWC && s.rank() == 4 && s[2] * s[3] != 1) {
    throw InvalidArgument(
        fmt::format("a view of channels-last {} as {} would reorder it", s.str(), shape.str()));
  }
  return Layout::kNCHW;
}

}  // namespace

Graph::Graph(Shape input_shape) {
  nodes_.push_back(Node{"input", nullptr, {}, std::move(input_shape), 0});
}

int Graph::add(std::string name, std::unique_ptr<Layer> layer, std::vector<int> inputs) {
  if (declared_) throw InvalidArgument("cannot add layers to a graph once it is declared");
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

std::vector<std::string> Graph::node_names() const {
  std::vector<std::string> names;
  for (const Node& n : nodes_) names.push_back(n.name);
  return names;
}

std::vector<Shape> Graph::input_shapes(const Node& n) const {
  std::vector<Shape> in;
  for (int i : n.inputs) in.push_back(nodes_[i].shape);
  return in;
}

int Graph::declare_tensor(TensorInfo info) { return dlb::declare_tensor(infos_, std::move(info)); }

// The backend's layout for a 4-D output, except where a flatten reads it with more than one
// pixel per channel: flattening reads channel-major (NCHW) order, which torchvision's linear
// weights expect, so that output is NCHW (its layer, a pooling in every reference model, reads a
// channels-last input and writes NCHW). With one pixel per channel both layouts are the same
// bytes.
Layout Graph::output_layout(int node) const {
  const Shape& s = nodes_[node].shape;
  if (activation_layout_ == Layout::kNCHW || s.rank() != 4) return Layout::kNCHW;
  if (s[2] * s[3] == 1) return activation_layout_;
  for (size_t k = static_cast<size_t>(node) + 1; k < nodes_.size(); ++k) {
    const Node& consumer = nodes_[k];
    if (!consumer.layer->is_view() || consumer.shape.rank() == 4) continue;
    for (int j : consumer.inputs) {
      if (j == node) return Layout::kNCHW;
    }
  }
  return activation_layout_;
}

bool Graph::runs_no_pass(int node) const {
  return nodes_[node].layer->is_view() || fused_into(node) >= 0;
}

int Graph::fused_into(int node) const {
  return node < static_cast<int>(fused_into_.size()) ? fused_into_[node] : -1;
}

// A view node's gradient can be its input's only when nothing else writes the input's gradient.
bool Graph::aliases_gradient(int node) const {
  const Node& n = nodes_[node];
  return runs_no_pass(node) && n.inputs[0] != input() && nodes_[n.inputs[0]].consumers == 1;
}

// Per node, its last consumer on the way to the loss (-1: none), whose backward pass writes the
// node's gradient first (backward runs in reverse node order), and the consumer before that one.
Graph::Consumers Graph::last_consumers() const {
  const int n = static_cast<int>(nodes_.size());
  std::vector<char> reaches(n, 0);
  Consumers c{std::vector<int>(n, -1), std::vector<int>(n, -1)};
  reaches[output()] = 1;
  for (int i = output(); i >= 1; --i) {
    if (!reaches[i]) continue;
    for (int j : nodes_[i].inputs) {
      reaches[j] = 1;
      if (c.last[j] < 0) {
        c.last[j] = i;
      } else if (c.before_last[j] < 0 && c.last[j] != i) {
        c.before_last[j] = i;
      }
    }
  }
  return c;
}

// The input slots of node i whose gradient can be a view of i's output gradient: i writes it
// first, it is a tensor of its own (not already a view), stored as i's, and no other slot of i
// reads the same input. And its share from an earlier consumer (added into the shared tensor
// after that consumer's data pass) must come after every pass that reads another input's
// gradient there: each other input must be later than that consumer (a residual block's last
// layer is; a layer that reads the block's input itself, then the add, is not).
std::vector<size_t> Graph::passable_slots(int i, const Consumers& c) const {
  const Node& node = nodes_[i];
  const TensorInfo& dy = infos_[grad_ids_[i]];
  std::vector<size_t> slots;
  for (size_t slot = 0; slot < node.inputs.size(); ++slot) {
    const int j = node.inputs[slot];
    if (j == input() || c.last[j] != i || grad_ids_[j] < 0) continue;
    if (std::count(node.inputs.begin(), node.inputs.end(), j) != 1) continue;
    const TensorInfo& g = infos_[grad_ids_[j]];
    if (g.alias_of >= 0 || g.shape != dy.shape || g.layout != dy.layout || g.dtype != dy.dtype) {
      continue;
    }
    const bool after_share = std::all_of(node.inputs.begin(), node.inputs.end(),
                                         [&](int k) { return k == j || k > c.before_last[j]; });
    if (after_share) slots.push_back(slot);
  }
  return slots;
}

void Graph::keep_gradients_distinct() {
  if (declared_) throw InvalidArgument("graph is already declared");
  distinct_gradients_ = true;
}

// A node whose data gradient is its output gradient for every input (a residual add): the
// gradients of the inputs it writes first, and its own output gradient, become one tensor. The
// earliest node's gradient stays the tensor (a view must be declared after what it views), and
// the others are views of it. A later consumer of such an input (the fork of a residual block)
// adds its share into it after this node's other inputs have read it: the schedule orders those
// reads before the add (link_dependencies follows views to their storage), and so does every
// reordering of it.
void Graph::pass_gradients_through() {
  passed_.assign(nodes_.size(), {});
  if (distinct_gradients_) return;
  const Consumers consumers = last_consumers();
  for (size_t n = 1; n < nodes_.size(); ++n) {
    const int i = static_cast<int>(n);
    if (!nodes_[i].layer->passes_gradient_through() || runs_no_pass(i)) continue;
    if (infos_[grad_ids_[i]].alias_of >= 0) continue;
    const std::vector<size_t> slots = passable_slots(i, consumers);
    if (slots.empty()) continue;
    passed_[i].assign(nodes_[i].inputs.size(), 0);
    int base = grad_ids_[i];
    for (size_t slot : slots) base = std::min(base, grad_ids_[nodes_[i].inputs[slot]]);
    for (size_t slot : slots) {
      passed_[i][slot] = 1;
      const int g = grad_ids_[nodes_[i].inputs[slot]];
      if (g != base) infos_[g].alias_of = base;
    }
    infos_[grad_ids_[i]].alias_of = base;
  }
}

// A ReLU whose only input is a layer that can apply it itself (batch norm, where the backend
// fuses the pair), and that layer's only consumer: the layer takes the ReLU over, and the ReLU
// node becomes a view of its output, with its gradient the layer's output gradient.
void Graph::fuse_relus(const BackendTraits& traits) {
  fused_into_.assign(nodes_.size(), -1);
  if (distinct_gradients_) return;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    if (!node.layer->is_relu() || node.inputs.size() != 1) continue;
    const int j = node.inputs[0];
    if (j == input() || nodes_[j].consumers != 1) continue;
    if (!nodes_[j].layer->can_fuse_relu(traits)) continue;
    nodes_[j].layer->fuse_relu();
    fused_into_[i] = j;
  }
}

void Graph::declare(const PrecisionPolicy& policy, const BackendTraits& traits) {
  if (declared_) throw InvalidArgument("graph is already declared");
  declared_ = true;
  policy_ = policy;
  traits_ = traits;
  const size_t n = nodes_.size();
  output_ids_.assign(n, -1);
  grad_ids_.assign(n, -1);
  saved_ids_.assign(n, {});
  scratch_ids_.assign(n, {});
  param_ids_.assign(n, {});
  param_grad_ids_.assign(n, {});
  requested_.assign(n, {});
  node_tensors_.assign(n, LayerTensors());
  activation_layout_ = traits.activation_layout;
  fuse_relus(traits);
  input_id_ = declare_tensor({"input", TensorKind::kInput, nodes_[0].shape, policy.activations, 0,
                              -1, MemCategory::kData, stored(output_layout(0), nodes_[0].shape)});
  output_ids_[0] = input_id_;
  for (size_t i = 1; i < n; ++i) declare_node(static_cast<int>(i));
  pass_gradients_through();
  // A view's gradient is its input's (inputs come first, so theirs exist by now).
  for (size_t i = 1; i < n; ++i) {
    if (!aliases_gradient(static_cast<int>(i))) continue;
    const int from = grad_ids_[nodes_[i].inputs[0]];
    grad_ids_[i] =
        declare_tensor({"grad of " + nodes_[i].name, TensorKind::kActivationGrad, nodes_[i].shape,
                        policy.activations, static_cast<int>(i), from, infos_[from].category,
                        view_layout(infos_[from], nodes_[i].shape)});
  }
  declare_gradients();
  declare_fork_scratch();
  overlay_scratch();
  build_forward();
  build_backward();
}

// A layer's scratch that may take its output gradient's bytes (a fused convolution's masked
// gradient) takes them where that gradient is the node's alone: no view of another tensor, and
// viewed by nothing but the gradient of the ReLU the node took over (whose consumers write it).
// A residual add that passes its gradient through makes it another node's too: then the scratch
// keeps memory of its own, and the add's gradient is never overwritten.
void Graph::overlay_scratch() {
  for (size_t n = 1; n < nodes_.size(); ++n) {
    const int i = static_cast<int>(n), g = grad_ids_[n];
    if (g < 0 || infos_[g].alias_of >= 0) continue;
    bool alone = true;
    for (const TensorInfo& t : infos_) {
      const bool fused_relu = t.node >= 0 && fused_into_[static_cast<size_t>(t.node)] == i;
      alone = alone && (t.alias_of != g || (fused_relu && t.kind == TensorKind::kActivationGrad));
    }
    if (!alone) continue;
    for (const auto& [request, id] : requested_[n]) {
      if (request.kind == TensorKind::kScratch && request.over_output_gradient) {
        infos_[id].alias_of = g;
      }
    }
  }
}

// How a parameter's compute copy and gradient are stored: as its request says where that is not
// NCHW (a blocked value's gradient in its blocks, a compute copy in the backend's
// conv_weight_copy_layout, LayerDeclaration::compute_copy), else as the backend stores
// activations (channels-last: KRSC).
Layout Graph::read_layout(const TensorRequest& r) const {
  return r.layout != Layout::kNCHW ? r.layout : stored(activation_layout_, r.shape);
}

// One tensor a node's layer declares.
void Graph::declare_request(int i, const TensorRequest& r) {
  TensorInfo info{nodes_[i].name + "." + r.name, r.kind, r.shape, r.dtype, i};
  const bool activation = r.kind == TensorKind::kSaved || r.kind == TensorKind::kScratch;
  info.category = activation ? MemCategory::kActivations : MemCategory::kWeights;
  if (r.compute_copy) {
    info.name += " (compute copy)";
    info.layout = read_layout(r);
  } else if (activation) {
    // Stored like the node's output (a dropout mask is read element by element with it; a
    // masked gradient is the output's gradient, masked).
    info.layout = stored(output_layout(i), r.shape);
  } else if (r.kind == TensorKind::kParam) {
    info.layout = r.layout;  // torchvision's, or the backend's blocks (blocks_conv_weights)
  }
  const int id = declare_tensor(std::move(info));
  if (r.kind == TensorKind::kParam && !r.compute_copy) param_ids_[i].push_back(id);
  if (r.kind == TensorKind::kSaved) saved_ids_[i].push_back(id);
  if (r.kind == TensorKind::kScratch) scratch_ids_[i].push_back(id);
  requested_[i].push_back({r, id});
  node_tensors_[i].add(r, id);
}

// A node's own tensors (what its layer declares), its output and its output's gradient. Its
// scratch comes last, after the gradient whose bytes it may take (overlay_scratch: a view
// follows what it views).
void Graph::declare_node(int i) {
  const Node& node = nodes_[i];
  const DType act = policy_.activations;
  const std::vector<Shape> in = input_shapes(node);
  LayerDeclaration d(in, policy_, traits_);
  node.layer->declare(d);
  for (const TensorRequest& r : d.requests()) {
    if (r.kind != TensorKind::kScratch) declare_request(i, r);
  }
  if (runs_no_pass(i)) {
    // The output is the input's bytes (under another shape, or after the ReLU that the input's
    // layer applied itself): nothing to store or run.
    const int from = output_ids_[node.inputs[0]];
    output_ids_[i] = declare_tensor({node.name, TensorKind::kActivation, node.shape, act, i, from,
                                     infos_[from].category, view_layout(infos_[from], node.shape)});
  } else {
    output_ids_[i] =
        declare_tensor({node.name, TensorKind::kActivation, node.shape, act, i, -1,
                        MemCategory::kActivations, stored(output_layout(i), node.shape)});
  }
  if (!aliases_gradient(i)) {  // else declared once the input's exists
    grad_ids_[i] =
        declare_tensor({"grad of " + node.name, TensorKind::kActivationGrad, node.shape, act, i, -1,
                        MemCategory::kActivations, stored(output_layout(i), node.shape)});
  }
  for (const TensorRequest& r : d.requests()) {
    if (r.kind == TensorKind::kScratch) declare_request(i, r);
  }
}

// Every parameter gradient is a slice of one flat buffer, in reverse layer order, each starting
// on a kGradientAlignmentBytes boundary: cuDNN and cuBLASLt write them and are promised aligned
// pointers (cudnn-frontend assumes 16 bytes, cuBLASLt's heuristic 256). The buffer starts zeroed,
// so its gaps stay zero: an all-reduce or fp16's inf check over the whole buffer reads zeros.
// Under --memory-guard each gradient is followed by a zone of zeros that must stay zeros, so a
// pass that writes one element past a parameter's gradient is named.
void Graph::declare_gradients() {
  const size_t elem = dtype_size(policy_.gradients);
  const auto align = static_cast<int64_t>(kGradientAlignmentBytes / elem);
  auto aligned = [&](int64_t offset) { return (offset + align - 1) / align * align; };
  const int64_t gap = traits_.guarded ? static_cast<int64_t>(MemoryGuard::kZoneBytes / elem) : 0;
  int64_t total = 0, declared = 0;
  for (size_t i = nodes_.size() - 1; i >= 1; --i) {
    for (int id : param_ids_[i]) total = aligned(total) + infos_[id].shape.numel() + gap;
    declared += nodes_[i].layer->num_params();
  }
  flat_id_ = declare_tensor({"flat gradient buffer", TensorKind::kGradientBuffer,
                             Shape{std::max<int64_t>(total, 1)}, policy_.gradients, -1, -1,
                             MemCategory::kGradients});
  grad_offsets_.clear();
  grad_gaps_.clear();
  int64_t offset = 0, values = 0;
  for (size_t i = nodes_.size() - 1; i >= 1; --i) {
    for (const auto& [request, id] : requested_[i]) {
      if (request.kind != TensorKind::kParam || request.compute_copy) continue;
      const std::string name = nodes_[i].name + "." + request.name;
      offset = aligned(offset);
      grad_offsets_.push_back(offset);
      // A conv weight's gradient is stored as backward-filter writes it (read_layout).
      const int grad = declare_tensor({name + ".grad", TensorKind::kParamGrad, request.shape,
                                       policy_.gradients, static_cast<int>(i), flat_id_,
                                       MemCategory::kGradients, read_layout(request), offset});
      offset += request.shape.numel();
      values += request.shape.numel();
      grad_gaps_.push_back({offset, gap, fmt::format("gap after the gradient of {}", name)});
      offset += gap;
      param_grad_ids_[i].push_back(grad);
      node_tensors_[i].add_grad(request.name, grad);
      flat_params_.push_back({name, id, grad, compute_copy_id(static_cast<int>(i), request.name)});
    }
  }
  if (values != declared) {
    throw InvalidArgument(
        fmt::format("parameters hold {} values, layers declared {}", values, declared));
  }
}

// The id of node i's compute copy of parameter `name`; -1 when the passes read the value.
int Graph::compute_copy_id(int i, const std::string& name) const {
  for (const auto& [request, id] : requested_[i])
    if (request.compute_copy && request.name == name) return id;
  return -1;
}

// A fork's second consumer writes its gradient contribution to scratch, then adds it: one scratch
// tensor per input slot, as large as the largest fork it serves.
void Graph::declare_fork_scratch() {
  size_t max_slots = 0;
  for (const Node& node : nodes_) max_slots = std::max(max_slots, node.inputs.size());
  for (size_t slot = 0; slot < max_slots; ++slot) {
    int64_t largest = 0;
    for (size_t i = 1; i < nodes_.size(); ++i) {
      const Node& node = nodes_[i];
      if (slot < node.inputs.size() && nodes_[node.inputs[slot]].consumers > 1) {
        largest = std::max(largest, nodes_[node.inputs[slot]].shape.numel());
      }
    }
    fork_scratch_.push_back(
        largest ? declare_tensor({fmt::format("fork gradient {}", slot), TensorKind::kScratch,
                                  Shape{largest}, policy_.activations})
                : -1);
  }
}

Schedule Graph::step_schedule() const {
  Schedule s = forward_;
  s.steps.insert(s.steps.end(), backward_.steps.begin(), backward_.steps.end());
  return s;
}

void Graph::declare_for(Backend& backend, const PrecisionPolicy& policy) {
  declare(policy, BackendTraits::of(backend, OpTypes::of(policy)));
}

void Graph::setup(Backend& backend, Rng& rng, const PrecisionPolicy& policy) {
  if (is_setup()) throw InvalidArgument("graph is already set up");
  declare_for(backend, policy);
  bind(backend, rng, naive_plan(step_schedule(), infos_));
}

void Graph::bind(Backend& backend, Rng& rng, const MemoryPlan& plan) {
  own_ = std::make_unique<BoundStep>(bind(backend, rng, plan, infos_));
}

const BoundStep& Graph::bound() const {
  if (!own_ || !is_setup()) {
    throw InvalidArgument(
        "the graph keeps no bound step of its own: it is not set up, or a trainer bound it (its "
        "tensors are the trainer's)");
  }
  return *own_;
}

const LayerTensors& Graph::layer_tensors(int node) const {
  if (!is_setup()) {
    throw InvalidArgument("a layer's tensors are a bound step's: the graph is not set up");
  }
  return node_tensors_.at(node);
}

BoundTable& Graph::table() const {
  // Whoever runs a pass holds the bound step, so it cannot go mid-pass: a check, not a lock.
  if (alive_.expired()) throw InvalidArgument("the graph's bound step is gone: bind it again");
  return *table_;
}

void Graph::check_binding(Backend& backend, const MemoryPlan& plan,
                          const std::vector<TensorInfo>& tensors) const {
  if (!declared_) throw InvalidArgument("a graph is declared before it is bound");
  if (is_setup()) throw InvalidArgument("graph is already set up");
  if (plan.buffer_of.size() != tensors.size()) {
    throw InvalidArgument(fmt::format("the memory plan places {} tensors; the table has {}",
                                      plan.buffer_of.size(), tensors.size()));
  }
  // The step's table begins with the model's, as declared (StepProgram copies it).
  const bool begins_with_model =
      tensors.size() >= infos_.size() &&
      std::equal(infos_.begin(), infos_.end(), tensors.begin(),
                 [](const TensorInfo& a, const TensorInfo& b) {
                   return a.name == b.name && a.kind == b.kind && a.shape == b.shape &&
                          a.dtype == b.dtype && a.node == b.node && a.alias_of == b.alias_of &&
                          a.category == b.category && a.layout == b.layout && a.offset == b.offset;
                 });
  if (!begins_with_model) {
    throw InvalidArgument("the table bound does not begin with the graph's own tensors");
  }
  check_traits(backend);
}

void Graph::check_traits(Backend& backend) const {
  const BackendTraits traits = BackendTraits::of(backend, OpTypes::of(policy_));
  if (traits.activation_layout != traits_.activation_layout ||
      traits.fuses_batch_norm_relu != traits_.fuses_batch_norm_relu ||
      traits.fuses_conv_relu != traits_.fuses_conv_relu || traits.guarded != traits_.guarded ||
      traits.blocks_conv_weights != traits_.blocks_conv_weights ||
      traits.blocked_weight_copy != traits_.blocked_weight_copy ||
      traits.saves_pool_argmax != traits_.saves_pool_argmax) {
    throw InvalidArgument(
        "the graph was declared for a backend that stores, fuses or saves its tensors otherwise, "
        "or "
        "without --memory-guard's zones: declare it with BackendTraits::of(this backend)");
  }
}

void Graph::plan_ops(Backend& backend) {
  if (!declared_) throw InvalidArgument("a graph is declared before its ops are planned");
  if (is_setup()) throw InvalidArgument("graph is already set up");
  check_traits(backend);  // plans for the layout its tensors are declared in
  require(backend);       // before the plans allocate their workspace
  for (size_t i = 1; i < nodes_.size(); ++i) {
    const std::vector<Shape> in = input_shapes(nodes_[i]);
    nodes_[i].layer->plan(LayerPlanning{backend, in, policy_});
  }
  planned_for_ = &backend;
}

BoundStep Graph::bind(Backend& backend, Rng& rng, const MemoryPlan& plan,
                      const std::vector<TensorInfo>& tensors) {
  check_binding(backend, plan, tensors);
  require(backend);  // before a byte is allocated
  backend.allocator().require_room(
      plan.device_bytes(), fmt::format("the step's tensors at batch {} ({} buffers as planned)",
                                       shape(input())[0], plan.buffers.size()));
  // The layers' plans, and the workspace they reserve, first (where no one made them): held
  // beside the step's tensors. A binding that fails releases the workspace its own plans
  // reserved (a backend's own scratch, the CUDA batch norm's, stays with the backend).
  const bool plans_here = planned_for_ != &backend;
  try {
    if (plans_here) plan_ops(backend);
    // The backend sized its workspace from the algorithms the layers' plans chose, and grows it
    // when a pass needs more, outside this table (Backend::workspace says why). Every other byte
    // of the step is in the bound step.
    BoundStep step(backend.allocator(), plan, tensors);
    guard_gradients(backend, step);
    borrow(backend, step);
    setup_layers(rng);
    refresh_compute_copies();
    return step;
  } catch (...) {
    // Not set up: what was allocated went with the step.
    backend_ = nullptr;
    table_ = nullptr;
    for (LayerTensors& t : node_tensors_) t.borrow(nullptr);
    if (plans_here) {
      planned_for_ = nullptr;  // planned again when bound again
      backend.release_workspace();
    }
    throw;
  }
}

void Graph::borrow(Backend& backend, const BoundStep& step) {
  alive_ = step.table();
  table_ = step.table().get();
  for (LayerTensors& t : node_tensors_) t.borrow(table_);
  backend_ = &backend;
}

void Graph::guard_gradients(Backend& backend, const BoundStep& step) const {
  Tensor& flat_grads = step.tensor(flat_id_);
  if (traits_.guarded) {
    const size_t elem = dtype_size(policy_.gradients);
    for (const GradGap& g : grad_gaps_) {
      backend.allocator().guard_interior(*flat_grads.buffer(), static_cast<size_t>(g.at) * elem,
                                         static_cast<size_t>(g.elements) * elem, g.what);
    }
  }
  backend.fill(flat_grads, 0.f);
}

void Graph::refresh_compute_copies() {
  for (size_t i = 1; i < node_tensors_.size(); ++i) {
    for (const std::string& name : node_tensors_[i].param_names())
      refresh_compute_copy(*backend_, node_tensors_[i].param(name));
  }
}

void Graph::require(const Backend& backend) const {
  if (!declared_) throw InvalidArgument("a graph is declared before its ops are checked");
  for (size_t i = 1; i < nodes_.size(); ++i) nodes_[i].layer->require(backend, policy_);
}

// Each layer takes its declared tensors, bound, and initialises from its own generator (its plans
// were made by plan_ops).
void Graph::setup_layers(Rng& rng) {
  for (size_t i = 1; i < nodes_.size(); ++i) {
    Node& node = nodes_[i];
    Rng layer_rng = rng.fork(i);
    const std::vector<Shape> in = input_shapes(node);
    LayerSetup s{*backend_, in, layer_rng, policy_, node_tensors_[i]};
    node.layer->setup(s);
  }
}

void Graph::build_forward() {
  for (size_t i = 1; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    if (runs_no_pass(static_cast<int>(i))) continue;
    Step s;
    s.pass = Pass::kForward;
    s.node = static_cast<int>(i);
    for (int j : node.inputs) s.x.push_back(output_ids_[j]);
    s.y = output_ids_[i];
    s.reads = s.x;
    s.reads.insert(s.reads.end(), param_ids_[i].begin(), param_ids_[i].end());
    s.writes.push_back(s.y);
    s.writes.insert(s.writes.end(), saved_ids_[i].begin(), saved_ids_[i].end());
    // What backward will read of this pass (a memory planner keeps these alive).
    const PassReads d = node.layer->backward_data_reads(), w = node.layer->backward_weights_reads();
    if (d.input || w.input)
      for (int j : node.inputs) s.saves.push_back(output_ids_[j]);
    if (d.output || w.output) s.saves.push_back(output_ids_[i]);
    s.saves.insert(s.saves.end(), saved_ids_[i].begin(), saved_ids_[i].end());
    forward_.steps.push_back(std::move(s));
  }
  link_dependencies(forward_, infos_);
}

// Where node i's backward pass writes the gradient of its input `slot`: the input's gradient,
// the first time one is written; scratch, added to it by an accumulate pass (appended to `adds`),
// for a fork's later consumers; -1 for the graph's input, except for a fused pass, which writes a
// data gradient whether or not anything reads it.
int Graph::backward_target(int i, size_t slot, bool fused, std::vector<char>& written,
                           std::vector<Step>& adds) {
  const Node& node = nodes_[i];
  const int j = node.inputs[slot];
  if (slot < passed_[i].size() && passed_[i][slot]) {  // the gradient is i's output gradient
    written[j] = 1;
    return -1;
  }
  if (j == input()) {
    if (!fused || !node.layer->fused_backward_writes_unread_gradient()) return -1;
    return declare_tensor({fmt::format("unused input gradient of {}", node.name),
                           TensorKind::kScratch, nodes_[j].shape, policy_.activations, i, -1,
                           MemCategory::kActivations, stored(output_layout(j), nodes_[j].shape)});
  }
  if (!written[j]) {
    written[j] = 1;
    return grad_ids_[j];
  }
  const int target = declare_tensor({fmt::format("fork gradient {} as {}", slot, nodes_[j].name),
                                     TensorKind::kScratch, nodes_[j].shape, policy_.activations, j,
                                     fork_scratch_.at(slot), MemCategory::kActivations,
                                     infos_[grad_ids_[j]].layout});
  Step add;
  add.pass = Pass::kAccumulate;
  add.node = j;
  add.reads = {target, grad_ids_[j]};
  add.writes = {grad_ids_[j]};
  adds.push_back(std::move(add));
  return target;
}

// A backward pass of node i binds its inputs, its output and its output's gradient, and reads
// the gradient (what else it reads is PassReads').
void Graph::set_pass_tensors(int i, Step& s) const {
  for (int j : nodes_[i].inputs) s.x.push_back(output_ids_[j]);
  s.y = output_ids_[i];
  s.dy = grad_ids_[i];
  s.reads.push_back(s.dy);
}

void Graph::build_backward() {
  const int n = static_cast<int>(nodes_.size());
  std::vector<char> written(n, 0);
  written[output()] = 1;
  auto pass_reads = [&](int i, PassReads r, Step& s) {
    if (r.input)
      for (int j : nodes_[i].inputs) s.reads.push_back(output_ids_[j]);
    if (r.output) s.reads.push_back(output_ids_[i]);
  };
  for (int i = output(); i >= 1; --i) {
    const Node& node = nodes_[i];
    if (!written[i]) continue;  // does not reach the loss
    if (aliases_gradient(i)) {  // the gradient already is the input's
      written[node.inputs[0]] = 1;
      continue;
    }
    const bool fused = node.layer->fused_backward();
    Step data;
    data.pass = fused ? Pass::kBackward : Pass::kBackwardData;
    data.node = i;
    set_pass_tensors(i, data);
    pass_reads(i, node.layer->backward_data_reads(), data);
    data.reads.insert(data.reads.end(), param_ids_[i].begin(), param_ids_[i].end());
    data.reads.insert(data.reads.end(), saved_ids_[i].begin(), saved_ids_[i].end());
    data.writes = scratch_ids_[i];  // written and read within the pass
    std::vector<Step> adds;
    for (size_t slot = 0; slot < node.inputs.size(); ++slot) {
      const int target = backward_target(i, slot, fused, written, adds);
      data.dx.push_back(target);
      if (target >= 0) data.writes.push_back(target);
    }
    if (fused) {
      data.writes.insert(data.writes.end(), param_grad_ids_[i].begin(), param_grad_ids_[i].end());
    }
    if (!data.writes.empty()) backward_.steps.push_back(std::move(data));
    for (Step& a : adds) backward_.steps.push_back(std::move(a));
    if (!fused && !param_ids_[i].empty()) {
      Step weights;
      weights.pass = Pass::kBackwardWeights;
      weights.node = i;
      set_pass_tensors(i, weights);
      pass_reads(i, node.layer->backward_weights_reads(), weights);
      weights.reads.insert(weights.reads.end(), saved_ids_[i].begin(), saved_ids_[i].end());
      weights.writes = param_grad_ids_[i];
      backward_.steps.push_back(std::move(weights));
    }
  }
  link_dependencies(backward_, infos_);
}

void Graph::run(const Step& step, const LayerContext& ctx) {
  Node& node = nodes_.at(step.node);
  BoundTable& t = table();
  auto bound = [&](int id) -> Tensor& { return t.at(static_cast<size_t>(id)); };
  if (step.pass == Pass::kAccumulate) {
    ctx.backend.accumulate(bound(step.reads.at(0)), bound(step.writes.at(0)));
    return;
  }
  if (step.pass == Pass::kLoss || step.pass == Pass::kSync) {
    throw InvalidArgument(fmt::format("the graph does not run {} passes", pass_name(step.pass)));
  }
  std::vector<const Tensor*> x;
  for (int id : step.x) x.push_back(&bound(id));
  const LayerTensors& own = node_tensors_[step.node];
  Tensor& y = bound(step.y);
  switch (step.pass) {
    case Pass::kForward:
      node.layer->forward(ctx, own, x, y);
      return;
    case Pass::kRecompute: {
      LayerContext again = ctx;
      again.recompute = true;
      node.layer->forward(again, own, x, y);
      return;
    }
    case Pass::kBackwardData:
    case Pass::kBackward: {
      std::vector<Tensor*> dx;
      for (int id : step.dx) dx.push_back(id < 0 ? nullptr : &bound(id));
      node.layer->backward_data(ctx, own, x, y, bound(step.dy), dx);
      return;
    }
    case Pass::kBackwardWeights:
      node.layer->backward_weights(ctx, own, x, y, bound(step.dy));
      return;
    default:
      throw InvalidArgument(fmt::format("the graph does not run {} passes", pass_name(step.pass)));
  }
}

void Graph::run_pass(const Step& step, const LayerContext* ctx) {
  if (!ctx) throw InvalidArgument("the graph's passes compute: they need a layer context");
  run(step, *ctx);
}

std::vector<Graph::NamedParam> Graph::named_params() const {
  std::vector<NamedParam> out;
  if (!is_setup()) {  // names only: what each layer would declare
    for (size_t i = 1; i < nodes_.size(); ++i) {
      const std::vector<Shape> in = input_shapes(nodes_[i]);
      const PrecisionPolicy policy;
      LayerDeclaration d(in, policy);
      nodes_[i].layer->declare(d);
      for (const TensorRequest& r : d.requests())
        if (r.kind == TensorKind::kParam && !r.compute_copy)
          out.push_back({nodes_[i].name + "." + r.name, Param{r.name, {}, {}, {}}});
    }
    return out;
  }
  for (size_t i = 1; i < node_tensors_.size(); ++i) {
    for (const std::string& name : node_tensors_[i].param_names())
      out.push_back({nodes_[i].name + "." + name, node_tensors_[i].param(name)});
  }
  return out;
}

int64_t Graph::num_params() const {
  int64_t total = 0;
  for (const Node& node : nodes_)
    if (node.layer) total += node.layer->num_params();
  return total;
}

StateDict Graph::state_dict() const {
  if (!is_setup()) throw InvalidArgument("state_dict of a graph that is not set up");
  StateDict out;
  for (size_t i = 1; i < nodes_.size(); ++i)
    save_layer_state(*backend_, node_tensors_[i], nodes_[i].name + ".", out);
  return out;
}

void Graph::load_state_dict(const StateDict& state) {
  if (!is_setup()) throw InvalidArgument("load_state_dict on a graph that is not set up");
  std::vector<std::string> used;
  for (size_t i = 1; i < nodes_.size(); ++i)
    load_layer_state(*backend_, node_tensors_[i], nodes_[i].name + ".", state, used);
  if (used.size() != state.size()) {
    std::sort(used.begin(), used.end());
    std::vector<std::string> unexpected;
    for (const auto& [name, t] : state)
      if (!std::binary_search(used.begin(), used.end(), name)) unexpected.push_back(name);
    throw InvalidArgument(
        fmt::format("unexpected tensors in the state: {}", fmt::join(unexpected, ", ")));
  }
  refresh_compute_copies();
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
