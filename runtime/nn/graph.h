// A network as a DAG of named layers. Nodes are added in topological order, so forward runs in
// insertion order and backward in reverse. Node names are torchvision module paths, which makes
// parameter names ("layer1.0.conv1.weight") match torchvision's state_dict.
// Declaring the graph records the model's tensors (outputs, gradients, what layers declare) in a
// table and emits the forward and backward passes as a Schedule over it, calling no backend and
// allocating nothing. A training step's program (runtime/train/step_program.h) copies that table
// and declares the step's own tensors after it; binding stores a table that begins with the
// model's as a MemoryPlan says (a BoundStep, runtime/nn/bound_step.h, which owns the storage) and
// sets the layers up on it. The graph borrows the bound step's table while it lives.
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "runtime/nn/bound_step.h"
#include "runtime/nn/layer.h"
#include "runtime/nn/memory_plan.h"
#include "runtime/nn/schedule.h"

namespace dlb {

// Every parameter's gradient starts this aligned in the flat gradient buffer.
constexpr size_t kGradientAlignmentBytes = 256;

class Graph final : public PassRunner {
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
    Param param;  // its tensors as bound now
  };

  explicit Graph(Shape input_shape);

  int input() const { return 0; }
  // Adds a node fed by `inputs`; infers its shape now, throwing InvalidArgument naming the node.
  int add(std::string name, std::unique_ptr<Layer> layer, std::vector<int> inputs);
  int output() const { return static_cast<int>(nodes_.size()) - 1; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const Shape& shape(int node) const { return nodes_.at(node).shape; }
  std::vector<std::string> node_names() const;

  // Declares every tensor of the model in the policy's dtypes, each with its category and layout
  // (parameters, buffers, saved state, compute copies, activations and their gradients, the flat
  // gradient buffer and its slices, scratch), and builds the forward and backward schedules. No
  // backend is called and nothing is allocated: `traits` say what the backend would do.
  void declare(const PrecisionPolicy& policy, const BackendTraits& traits);
  bool is_declared() const { return declared_; }
  // Before declare: every activation's gradient in a tensor of its own, as it was when its pass
  // wrote it, so a residual add copies instead of passing its gradient on
  // (Layer::passes_gradient_through), and no ReLU is fused into its batch norm (whose output and
  // gradient it would share). A step dump needs it: it reads each pass's gradient after the step,
  // and a shared one holds the fork's sum by then. Fused, the step computes the same bits in f32
  // (tests/unit/fusion_test.cpp).
  void keep_gradients_distinct();
  // Throws Unsupported, in node order, where `backend` cannot run a layer's ops in the declared
  // policy's dtypes (Layer::require). bind calls it before allocating.
  void require(const Backend& backend) const;
  // Makes every layer's plans for `backend` (Layer::plan) before anything is bound: the
  // workspace their algorithms reserve is then held, and whoever plans the step's tensors knows
  // it (--swap=auto's room). bind makes them where they were not made for `backend`.
  void plan_ops(Backend& backend);
  // Stores `tensors` on `backend` as `plan` (a plan over them) says, then sets every layer up:
  // parameters initialised from `rng` (the layers' plans made first, plan_ops). `tensors` begins
  // with tensor_infos(), the model's own; what follows is the step's (a StepProgram's table),
  // bound beside them. The step returned owns the storage; the graph runs on it while it lives,
  // and is no longer set up once it is gone.
  [[nodiscard]] BoundStep bind(Backend& backend, Rng& rng, const MemoryPlan& plan,
                               const std::vector<TensorInfo>& tensors);
  // The model's tensors alone (a plan over step_schedule() and tensor_infos()), in a bound step
  // the graph keeps: a graph on its own.
  void bind(Backend& backend, Rng& rng, const MemoryPlan& plan);
  // declare with the traits of `backend` (BackendTraits::of).
  void declare_for(Backend& backend, const PrecisionPolicy& policy = {});
  // declare_for, then bind with naive_plan, keeping the bound step: a graph on its own
  // (inference, tests). A trainer binds the graph itself, once its own tensors are declared too.
  void setup(Backend& backend, Rng& rng, const PrecisionPolicy& policy = {});
  // Bound, and its bound step alive.
  bool is_setup() const { return backend_ != nullptr && !alive_.expired(); }
  // The step a graph on its own bound and keeps (setup, or bind with the model's tensors
  // alone); InvalidArgument for a graph a trainer bound, whose tensors are the trainer's.
  const BoundStep& bound() const;
  // Forward, then backward: the passes of the graph alone.
  Schedule step_schedule() const;
  const PrecisionPolicy& policy() const { return policy_; }

  // The model's tensors: every one its schedules name, with what it is and how it is stored.
  const std::vector<TensorInfo>& tensor_infos() const { return infos_; }
  // Node i's declared tensors and parameter gradients, as its passes get them, in the bound
  // step's table; InvalidArgument where the graph is not set up.
  const LayerTensors& layer_tensors(int node) const;
  // Node `node`'s output tensor (the input node's: the input).
  int output_id(int node) const { return output_ids_.at(node); }
  // A ReLU node that the layer before it applies itself (Layer::fuse_relu): that layer's index;
  // -1 for every other node. Decided at declare, from what the backend fuses (BackendTraits).
  int fused_into(int node) const;
  // Views and fused ReLUs: their output is another node's bytes, and no pass runs for them.
  bool runs_no_pass(int node) const;
  // The gradient of node `node`'s output (the loss writes the output node's).
  int grad_id(int node) const { return grad_ids_.at(node); }

  // Forward passes in insertion order; backward passes in reverse, each reading the gradient of
  // its output and writing its inputs' (a fork's later consumers through scratch + accumulate).
  const Schedule& forward_schedule() const { return forward_; }
  const Schedule& backward_schedule() const { return backward_; }
  // Runs one layer pass (forward, backward_data, backward_weights, backward, accumulate), with
  // the tensors its step names (Step::x, y, dy, dx) and its layer's own, from the bound table.
  void run(const Step& step, const LayerContext& ctx);
  void run_pass(const Step& step, const LayerContext* ctx) override;
  // The pass's node: its torchvision path.
  const std::string& label(const Step& step) const override { return nodes_.at(step.node).name; }

  // Every parameter, named by its torchvision path, in layer order; its tensors empty where the
  // graph is not set up.
  std::vector<NamedParam> named_params() const;
  // Parameters in the flat gradient buffer's order: reverse layer order (the order backward
  // produces them), so an all-reduce bucket is a contiguous slice. Their tensors' ids.
  const std::vector<ParamIds>& flat_params() const { return flat_params_; }
  // Every parameter gradient, in one buffer (flat_params order). Each gradient is a view.
  int flat_gradient_id() const { return flat_id_; }
  // Where each parameter's gradient starts in the flat buffer (flat_params() order), in elements.
  const std::vector<int64_t>& grad_offsets() const { return grad_offsets_; }
  int64_t num_params() const;
  StateDict state_dict() const;
  // Strict, as torch's load_state_dict: every entry must be used and none may be missing.
  void load_state_dict(const StateDict& state);

  double forward_flops() const;   // whole batch
  double training_flops() const;  // forward + 2 x forward of conv and linear layers
  double matmul_macs() const;     // conv and linear forward multiply-adds (torchvision's "GFLOPS")

 private:
  std::vector<Shape> input_shapes(const Node& n) const;
  int declare_tensor(TensorInfo info);  // one of the model's, during declare
  void declare_node(int i);
  void declare_gradients();
  int compute_copy_id(int i, const std::string& name) const;
  void declare_fork_scratch();
  void check_binding(Backend& backend, const MemoryPlan& plan,
                     const std::vector<TensorInfo>& tensors) const;
  // InvalidArgument where `backend` stores, fuses or saves tensors otherwise than declared.
  void check_traits(Backend& backend) const;
  // The layers look their tensors up in `step`'s table from now on.
  void borrow(Backend& backend, const BoundStep& step);
  // Under --memory-guard, the zones between the gradients; then every gradient zero.
  void guard_gradients(Backend& backend, const BoundStep& step) const;
  void setup_layers(Rng& rng);
  void refresh_compute_copies();
  // The bound table, while the bound step lives; InvalidArgument once it is gone.
  BoundTable& table() const;
  bool aliases_gradient(int node) const;
  void pass_gradients_through();
  struct Consumers {
    std::vector<int> last, before_last;  // per node (-1: none)
  };
  Consumers last_consumers() const;
  std::vector<size_t> passable_slots(int i, const Consumers& c) const;
  // How node i's output and its gradient are stored (Backend::activation_layout).
  Layout output_layout(int node) const;
  void fuse_relus(const BackendTraits& traits);
  void overlay_scratch();
  void declare_request(int i, const TensorRequest& r);
  Layout read_layout(const TensorRequest& param) const;
  void build_forward();
  void build_backward();
  void set_pass_tensors(int i, Step& s) const;
  int backward_target(int i, size_t slot, bool fused, std::vector<char>& written,
                      std::vector<Step>& adds);

  std::vector<Node> nodes_;
  std::vector<int> fused_into_;  // per node (-1: not a fused ReLU)
  Backend* backend_ = nullptr;
  const Backend* planned_for_ = nullptr;  // plan_ops's backend
  bool declared_ = false;
  PrecisionPolicy policy_;
  BackendTraits traits_;
  Layout activation_layout_ = Layout::kNCHW;  // the backend's for 4-D activations and weights
  std::vector<TensorInfo> infos_;
  // The bound step's table, borrowed: the layers' LayerTensors look their tensors up in it, while
  // `alive_` says it still is.
  BoundTable* table_ = nullptr;
  std::weak_ptr<BoundTable> alive_;
  std::unique_ptr<BoundStep> own_;  // a graph on its own: the step it bound (setup)
  int input_id_ = -1;
  std::vector<int> output_ids_, grad_ids_;                                // per node (-1: none)
  std::vector<std::vector<int>> saved_ids_, param_ids_, param_grad_ids_;  // per node
  std::vector<std::vector<int>> scratch_ids_;  // per node: its backward pass's own scratch
  // Per node: what its layer declared, and the tensor that holds each.
  std::vector<std::vector<std::pair<TensorRequest, int>>> requested_;
  std::vector<LayerTensors> node_tensors_;  // per node, over table_
  int flat_id_ = -1;                        // the flat gradient buffer
  // Under --memory-guard: the zone after each gradient, in elements of the flat buffer.
  struct GradGap {
    int64_t at = 0, elements = 0;
    std::string what;
  };
  std::vector<GradGap> grad_gaps_;
  std::vector<ParamIds> flat_params_;
  std::vector<int> fork_scratch_;  // per input slot (-1: none)
  // Per node, per input slot: the input's gradient is a view of the node's output gradient
  // (Layer::passes_gradient_through), so its backward pass writes nothing there.
  std::vector<std::vector<char>> passed_;
  bool distinct_gradients_ = false;
  std::vector<int64_t> grad_offsets_;
  Schedule forward_, backward_;
};

}  // namespace dlb
