// A network as a DAG of named layers. Nodes are added in topological order, so forward runs in
// insertion order and backward in reverse. Node names are torchvision module paths, which makes
// parameter names ("layer1.0.conv1.weight") match torchvision's state_dict.
// At setup the graph allocates every tensor of the step (outputs, gradients, what layers request)
// into one table and emits the forward and backward passes as a Schedule over that table.
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "runtime/nn/layer.h"
#include "runtime/nn/schedule.h"
#include "runtime/trace/tracer.h"

namespace dlb {

// Every parameter's gradient starts this aligned in the flat gradient buffer.
constexpr size_t kGradientAlignmentBytes = 256;

class Graph {
 public:
  struct Node {
    std::string name;
    std::unique_ptr<Layer> layer;  // null for the input node
    std::vector<int> inputs;
    Shape shape;  // output shape
    int consumers = 0;
  };
  struct NamedParam {
    std::string name;
    Param* param;
  };

  explicit Graph(Shape input_shape);

  int input() const { return 0; }
  // Adds a node fed by `inputs`; infers its shape now, throwing InvalidArgument naming the node.
  int add(std::string name, std::unique_ptr<Layer> layer, std::vector<int> inputs);
  int output() const { return static_cast<int>(nodes_.size()) - 1; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const Shape& shape(int node) const { return nodes_.at(node).shape; }
  std::vector<std::string> node_names() const;

  // Allocates parameters, plans, activations, gradients and saved state on `backend`, in the
  // policy's dtypes, and builds the forward and backward schedules.
  void setup(Backend& backend, Rng& rng, const PrecisionPolicy& policy = {});
  bool is_setup() const { return backend_ != nullptr; }
  const PrecisionPolicy& policy() const { return policy_; }

  Tensor& input_tensor() { return tensor(input_id_); }
  // Makes `images` (the input's shape and dtype) the input, and every view of it (a flatten on
  // the input) a view of it: a trainer's second input buffer.
  void rebind_input(const Tensor& images);
  const Tensor& output_tensor() const { return tensors_.at(output_ids_.at(output())); }
  // The loss writes the gradient of the output here before backward.
  Tensor& output_grad() { return tensor(grad_ids_.at(output())); }

  // The step's tensors: every one the schedules name, with what it is.
  const std::vector<TensorInfo>& tensor_infos() const { return infos_; }
  Tensor& tensor(int id) { return tensors_.at(id); }
  // Adds a tensor the graph does not own the meaning of (the loss's labels and probabilities).
  int add_tensor(TensorInfo info, Tensor t);
  int output_id(int node) const { return output_ids_.at(node); }
  // A ReLU node that the layer before it applies itself (Layer::fuse_relu): that layer's index;
  // -1 for every other node. Decided at setup, from what the backend fuses.
  int fused_into(int node) const;
  // Views and fused ReLUs: their output is another node's bytes, and no pass runs for them.
  bool runs_no_pass(int node) const;
  int grad_id(int node) const { return grad_ids_.at(node); }

  // Forward passes in insertion order; backward passes in reverse, each reading the gradient of
  // its output and writing its inputs' (a fork's later consumers through scratch + accumulate).
  const Schedule& forward_schedule() const { return forward_; }
  const Schedule& backward_schedule() const { return backward_; }
  // Runs one layer pass (forward, backward_data, backward_weights, backward, accumulate).
  void run(const Step& step, const LayerContext& ctx);
  // The forward (or backward) schedule's passes in order, traced: inference and tests.
  void forward(const LayerContext& ctx);
  void backward(const LayerContext& ctx);

  std::vector<NamedParam> named_params();
  // Parameters in the flat gradient buffer's order: reverse layer order (the order backward
  // produces them), so an all-reduce bucket is a contiguous slice.
  const std::vector<Param*>& flat_params() const { return flat_params_; }
  // The tensor ids of a parameter's value and gradient.
  int param_id(const Param* p) const;
  int param_grad_id(const Param* p) const;
  // Every parameter gradient, in one buffer (flat_params order). Each Param::grad is a view.
  Tensor& flat_gradients() { return flat_grads_; }
  // Where each parameter's gradient starts in the flat buffer (flat_params() order), in elements.
  const std::vector<int64_t>& grad_offsets() const { return grad_offsets_; }
  int64_t num_params() const;
  StateDict state_dict();
  // Strict, as torch's load_state_dict: every entry must be used and none may be missing.
  void load_state_dict(const StateDict& state);

  double forward_flops() const;   // whole batch
  double training_flops() const;  // forward + 2 x forward of conv and linear layers
  double matmul_macs() const;     // conv and linear forward multiply-adds (torchvision's "GFLOPS")

 private:
  class NodeTensors;
  std::vector<Shape> input_shapes(const Node& n) const;
  int allocate(TensorInfo info, MemCategory category, Layout layout = Layout::kNCHW);
  bool aliases_gradient(int node) const;
  // How node i's output and its gradient are stored (Backend::activation_layout).
  Layout output_layout(int node) const;
  void fuse_relus(const Backend& backend);
  void build_forward();
  void build_backward();
  void assign_gradients();

  std::vector<Node> nodes_;
  std::vector<int> fused_into_;  // per node (-1: not a fused ReLU)
  Backend* backend_ = nullptr;
  PrecisionPolicy policy_;
  Layout activation_layout_ = Layout::kNCHW;  // the backend's for 4-D activations and weights
  std::vector<TensorInfo> infos_;
  std::deque<Tensor> tensors_;  // stable references: node_inputs_ points into it
  int input_id_ = -1;
  std::vector<int> output_ids_, grad_ids_;                                // per node (-1: none)
  std::vector<std::vector<int>> saved_ids_, param_ids_, param_grad_ids_;  // per node
  std::vector<Param*> flat_params_;
  std::vector<std::pair<const Param*, std::pair<int, int>>> param_index_;  // value, grad ids
  std::vector<int> fork_scratch_;                        // per input slot (-1: none)
  std::vector<std::vector<const Tensor*>> node_inputs_;  // per node, its inputs' outputs
  Tensor flat_grads_;
  std::vector<int64_t> grad_offsets_;
  Schedule forward_, backward_;
};

}  // namespace dlb
