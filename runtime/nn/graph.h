// A network as a DAG of named layers. Nodes are added in topological order, so forward runs in
// insertion order and backward in reverse. Node names are torchvision module paths, which makes
// parameter names ("layer1.0.conv1.weight") match torchvision's state_dict.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "runtime/nn/layer.h"

namespace dlb {

// Notified around layer passes (gradient synchronisation hooks in here).
class GraphObserver {
 public:
  virtual ~GraphObserver() = default;
  virtual void before_forward(int node) = 0;
  // After node's backward (its weight gradients, if any, are written).
  virtual void after_backward_node(int node) = 0;
};

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

  // Allocates parameters, plans, activations and activation gradients on `backend`.
  void setup(Backend& backend, Rng& rng);
  bool is_setup() const { return backend_ != nullptr; }

  Tensor& input_tensor() { return outputs_[0]; }
  const Tensor& output_tensor() const { return outputs_[output()]; }
  // The loss writes the gradient of the output here before backward().
  Tensor& output_grad() { return grads_[output()]; }

  void set_observer(GraphObserver* observer) { observer_ = observer; }
  void forward(const LayerContext& ctx);
  void backward(const LayerContext& ctx);

  std::vector<NamedParam> named_params();
  // Every parameter gradient, in one buffer, in reverse layer order (the order backward produces
  // them), so an all-reduce bucket is a contiguous slice. Each Param::grad is a view into it.
  Tensor& flat_gradients() { return flat_grads_; }
  int64_t num_params() const;
  StateDict state_dict();
  // Strict, as torch's load_state_dict: every entry must be used and none may be missing.
  void load_state_dict(const StateDict& state);

  double forward_flops() const;   // whole batch
  double training_flops() const;  // forward + 2 x forward of conv and linear layers
  double matmul_macs() const;     // conv and linear forward multiply-adds (torchvision's "GFLOPS")

 private:
  std::vector<Shape> input_shapes(const Node& n) const;

  std::vector<Node> nodes_;
  Backend* backend_ = nullptr;
  std::vector<Tensor> outputs_, grads_;
  std::vector<std::vector<const Tensor*>> node_inputs_;  // per node, its inputs' outputs
  std::vector<Tensor> fork_scratch_;
  Tensor flat_grads_;
  GraphObserver* observer_ = nullptr;  // per input slot: where a second consumer's gradient lands
  std::vector<char> grad_written_;
};

}  // namespace dlb
