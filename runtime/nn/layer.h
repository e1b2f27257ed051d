// The layer contract (Caffe's, adapted): shape inference, plans (algorithms, for one fixed input
// shape, before anything is bound), setup (parameters), forward, and backward as two separate calls
// -- the weight gradient and the data gradient -- so a scheduler may order them and reuse memory
// between them. Layers declare what their passes read and every tensor they keep (declare), before
// anything is allocated, so the step's memory is visible to whoever plans it; setup then takes
// those tensors bound.
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/check/op_instance.h"
#include "runtime/core/host_tensor.h"
#include "runtime/core/precision_policy.h"
#include "runtime/core/rng.h"
#include "runtime/memory/tensor.h"
#include "runtime/nn/schedule.h"

namespace dlb {

// A trainable tensor's storage as the bound table holds it now: its value, its gradient and the
// copy the passes read. A view, resolved from tensor ids when asked for (BoundStep::param,
// LayerTensors::param): nothing keeps one across a re-binding.
struct Param {
  std::string name;  // "weight", "bias"; "layer1.0.conv1.weight" from a graph
  Tensor value;      // the master weights: what the optimizer updates and state_dict holds
  Tensor grad;       // in a graph, a slice of the flat gradient buffer
  // What forward and backward read: `value` itself, or (fp16 and bf16 runs, for conv and linear
  // weights) its copy in the compute dtype, which the optimizer refreshes after each update.
  Tensor compute;
  const Tensor& for_compute() const { return compute.defined() ? compute : value; }
  bool has_compute_copy() const { return compute.defined() && compute.raw() != value.raw(); }
};

// A parameter's tensors as ids in a bound table (a bound step's), in the flat buffer's order.
struct ParamIds {
  std::string name;  // "layer1.0.conv1.weight"
  int value = -1, grad = -1;
  int compute = -1;  // the compute copy; -1 when the passes read the value itself
};

// The storage a bound graph's tensors live in, by tensor id (stable references).
using BoundTable = std::deque<Tensor>;

// What a layer stores besides its inputs and outputs, declared before anything is allocated:
// parameters, buffers (state kept across steps, not trained: batch-norm running statistics),
// saved state (written in forward for a later pass of the step: batch statistics, a dropout
// mask) and the compute copies of parameters. Names are within the layer ("weight"); the graph
// records each in its table as "<node>.<name>".
struct TensorRequest {
  std::string name;
  TensorKind kind = TensorKind::kParam;  // kParam (a value or a compute copy), kBuffer, kSaved
  Shape shape;
  DType dtype = DType::kF32;
  bool compute_copy = false;  // the copy of parameter `name` the passes read
  // kScratch only: it may take the bytes of the layer's output gradient, which its pass then
  // overwrites (Graph::overlay_scratch decides: where nothing else reads that gradient).
  bool over_output_gradient = false;
  // kParam: how its value, compute copy, gradient and optimizer state are stored (kNCHW: as the
  // graph decides, torchvision's for the value).
  Layout layout = Layout::kNCHW;
};

// What declaring a graph needs to know of the backend that will run it (none of it allocates).
struct BackendTraits {
  Layout activation_layout = Layout::kNCHW;  // Backend::activation_layout
  bool fuses_batch_norm_relu = false;        // Backend::fuses_batch_norm_relu
  bool guarded = false;                      // --memory-guard: a zone after every gradient
  bool saves_pool_argmax = false;            // Backend::saves_pool_argmax
  bool fuses_conv_relu = false;              // Backend::fuses_conv_relu
  bool blocks_conv_weights = false;          // Backend::blocks_conv_weights
  // Backend::conv_weight_copy_layout of kOIhw16i16o weights: their 16-bit compute copies'.
  Layout blocked_weight_copy = Layout::kOIhw16i16o;
  static BackendTraits of(Backend& backend, const OpTypes& types);
};

class LayerDeclaration {
 public:
  LayerDeclaration(const std::vector<Shape>& in, const PrecisionPolicy& policy,
                   const BackendTraits& traits = {})
      : in(in), policy(policy), traits(traits) {}
  const std::vector<Shape>& in;
  const PrecisionPolicy& policy;
  const BackendTraits traits;  // of the backend that will run it, where one is known

  // A parameter stored in `layout` (with its gradient and optimizer state): torchvision's, or
  // one the backend's passes read without a reorder (BackendTraits::blocks_conv_weights).
  void param(const std::string& name, const Shape& shape, DType dtype,
             Layout layout = Layout::kNCHW);
  void buffer(const std::string& name, const Shape& shape, DType dtype);
  void saved(const std::string& name, const Shape& shape, DType dtype);
  // Written and read within the layer's (first) backward pass and dead after it: planned like an
  // activation, so it may share memory with what is dead by then (TensorKind::kScratch). With
  // `over_output_gradient`, the graph may make it the output gradient's own bytes instead.
  void scratch(const std::string& name, const Shape& shape, DType dtype,
               bool over_output_gradient = false);
  // The copy of parameter `name` (declared before) that the passes read, in `dtype`: nothing is
  // declared when the parameter already is in it. Its contents are set after setup.
  void compute_copy(const std::string& name, DType dtype);
  const std::vector<TensorRequest>& requests() const { return requests_; }

 private:
  std::vector<TensorRequest> requests_;
};

// A layer's declared tensors, and its parameters' gradients, by name: ids into a bound table,
// looked up at every pass. A layer keeps no tensor between passes, so re-binding the table (a
// memory plan, swapping) re-binds the layer.
class LayerTensors {
 public:
  LayerTensors() = default;
  explicit LayerTensors(BoundTable* table) : table_(table) {}
  void add(const TensorRequest& request, int id);
  void add_grad(const std::string& param, int id);
  // Throws InvalidArgument for a name the layer did not declare.
  Tensor& get(const std::string& name) const;
  // Parameter `name`'s compute copy, or the parameter itself when it needs none.
  const Tensor& compute_copy(const std::string& name) const;
  // Parameter `name`'s gradient; throws when none is bound.
  Tensor& grad(const std::string& name) const;
  bool has(const std::string& name) const { return find(name) != nullptr; }
  // The parameters in declaration order (state_dict order), and each as a view.
  std::vector<std::string> param_names() const;
  Param param(const std::string& name) const;
  // The parameters and buffers in declaration order (torchvision's state_dict order), with ids.
  struct Stored {
    std::string name;
    int id = -1;
  };
  std::vector<Stored> stored() const;
  BoundTable* table() const { return table_; }
  // The table its ids are looked up in from now on (a graph's bound step's; null: none).
  void borrow(BoundTable* table) { table_ = table; }

 private:
  struct Entry {
    std::string name;
    TensorKind kind = TensorKind::kParam;
    int value = -1, copy = -1, grad = -1;
  };
  const Entry* find(const std::string& name) const;
  const Entry& at(const std::string& name) const;
  Tensor& bound(int id, const std::string& name) const;
  BoundTable* table_ = nullptr;
  std::vector<Entry> entries_;
};

// A layer set up on its own, outside a graph (setup_standalone): its table, and its tensors in it.
struct StandaloneTensors {
  std::unique_ptr<BoundTable> table;
  LayerTensors tensors;
};

// What a layer's plans are made for (Layer::plan): the backend, the input shapes and the policy.
// No tensor is bound yet.
struct LayerPlanning {
  Backend& backend;
  const std::vector<Shape>& in;
  const PrecisionPolicy& policy;
  OpTypes op_types() const { return OpTypes::of(policy); }
};

struct LayerSetup {
  Backend& backend;
  const std::vector<Shape>& in;
  Rng& rng;
  const PrecisionPolicy& policy;
  const LayerTensors& tensors;
  OpTypes op_types() const { return OpTypes::of(policy); }
};

// What a backward pass reads of the forward pass, besides dy, the parameters and the layer's
// saved tensors: a memory planner must keep exactly these alive until that pass has run.
struct PassReads {
  bool input = false;
  bool output = false;
};

struct LayerContext {
  Backend& backend;
  bool training = true;
  DropoutSeed seed;  // per step, for dropout
  // A recomputation (Pass::kRecompute): the forward pass again, in the same step, for the same
  // outputs and saved tensors, changing no state (batch norm's running statistics and count).
  bool recompute = false;
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string_view kind() const = 0;

  // Output shape for these input shapes; throws InvalidArgument if they do not fit the layer.
  virtual Shape output_shape(const std::vector<Shape>& in) const = 0;
  // Declares what the layer stores for these input shapes and this policy (TensorRequest). No
  // backend is called: a simulator declares a model it never allocates.
  virtual void declare(LayerDeclaration& d) const { (void)d; }
  // Throws Unsupported where `backend` cannot run the layer's ops in the dtypes `policy` gives
  // them (Backend::require). Called before anything is allocated, so a configuration that a
  // backend cannot run is refused as unsupported even where it would not fit in memory.
  virtual void require(const Backend& backend, const PrecisionPolicy& policy) const {
    (void)backend, (void)policy;
  }
  // Makes the backend's plans for exactly these input shapes (a convolution's algorithms, batch
  // norm's Backend::plan_batch_norm), which reserve the workspace they need
  // (Backend::reserve_workspace). Before any tensor is bound: whoever plans the step's tensors then
  // knows the workspace (Graph::plan_ops).
  virtual void plan(const LayerPlanning& p) { (void)p; }
  // Initialises its declared tensors (`s.tensors`, bound) from rng; after plan. It keeps no
  // tensor: its passes get them again (`own`).
  virtual void setup(LayerSetup& s) { (void)s; }

  // The passes. `own`: the layer's declared tensors and parameter gradients, bound (a layer
  // keeps no tensor between passes); x, y, dy and dx come from the ids in the pass's step.
  virtual void forward(const LayerContext& ctx, const LayerTensors& own,
                       const std::vector<const Tensor*>& x, Tensor& y) = 0;
  // Writes dx[i] (overwriting) for each non-null entry.
  virtual void backward_data(const LayerContext& ctx, const LayerTensors& own,
                             const std::vector<const Tensor*>& x, const Tensor& y, const Tensor& dy,
                             const std::vector<Tensor*>& dx) = 0;
  // Writes the parameter gradients (overwriting). Layers without parameters do nothing. Not
  // called for a fused_backward layer.
  virtual void backward_weights(const LayerContext& ctx, const LayerTensors& own,
                                const std::vector<const Tensor*>& x, const Tensor& y,
                                const Tensor& dy) {
    (void)ctx, (void)own, (void)x, (void)y, (void)dy;
  }

  virtual PassReads backward_data_reads() const { return {}; }
  virtual PassReads backward_weights_reads() const { return {}; }
  // True when one backend call writes the data and the parameter gradients together (batch norm,
  // as cuDNN computes it): the schedule has one backward pass for the layer, backward_data gets a
  // data-gradient buffer even where nothing reads it, and writes the parameter gradients too.
  virtual bool fused_backward() const { return false; }
  // Whether that fused backward needs a buffer for a data gradient nothing reads (the graph's
  // input's): batch norm's one backend call writes it; a convolution's skips the pass instead.
  virtual bool fused_backward_writes_unread_gradient() const { return true; }
  // True when the output is the input under another shape (flatten): the graph makes the output
  // a view of the input, and the output gradient a view of the input gradient, and schedules no
  // pass for the layer. forward and backward_data still copy, for the layer used on its own.
  virtual bool is_view() const { return false; }
  // True when backward_data writes dy, unchanged, into every input's gradient (the residual add).
  // The graph then makes an input's gradient a view of dy wherever nothing else writes it first,
  // and the pass copies only into the rest: a step copies no residual gradient it need not.
  virtual bool passes_gradient_through() const { return false; }
  // Fusion with a following ReLU. The graph asks, before setup, whether this layer can apply
  // max(., 0) to its own output in its passes (batch norm or a convolution, where the backend
  // fuses the pair);
  // after fuse_relu() it does: its output is the ReLU's, its backward takes the gradient of that
  // and reads its output, and the ReLU node runs no pass (the graph makes it a view).
  virtual bool can_fuse_relu(const BackendTraits& traits) const {
    (void)traits;
    return false;
  }
  virtual void fuse_relu() {}
  virtual bool is_relu() const { return false; }

  // Trainable element count, known before setup (for listings and plans); the declaration
  // must agree. (Its parameters and buffers are what it declares, in state_dict order.)
  virtual int64_t num_params() const { return 0; }

  // Forward FLOPs for these input shapes (a multiply-add is 2). conv and linear count their
  // matrix products; other layers count one operation per element they compute.
  virtual double forward_flops(const std::vector<Shape>& in) const = 0;
  // True for conv and linear, whose backward costs twice their forward.
  virtual bool is_matmul_layer() const { return false; }
  // The backend ops its passes call for these input shapes, as the op checker runs them
  // (dlbench check-ops); none for a view.
  virtual std::vector<OpInstance> op_instances(const std::vector<Shape>& in) const {
    (void)in;
    return {};
  }
  // The algorithm each of its passes uses, where the backend chose one (convolutions), for the
  // per-layer profile. Empty before setup and for layers without a choice.
  virtual std::vector<PassAlgorithm> algorithms() const { return {}; }
};

// Sets a layer up on its own (outside a Graph): each declared tensor, and each parameter's
// gradient, its own buffer on `backend`. Its passes take the returned tensors.
StandaloneTensors setup_standalone(Layer& layer, Backend& backend, const std::vector<Shape>& in,
                                   Rng& rng, const PrecisionPolicy& policy = {});

// Sets a parameter's compute copy from its master value (after setup, a load or an update).
void refresh_compute_copy(Backend& backend, const Param& p);

// The layer's parameters and buffers, named `prefix + name`, into `out`.
void save_layer_state(Backend& backend, const LayerTensors& tensors, const std::string& prefix,
                      StateDict& out);
// Takes the layer's entries from `in`, checking dtype and shape; records the names it used.
void load_layer_state(Backend& backend, const LayerTensors& tensors, const std::string& prefix,
                      const StateDict& in, std::vector<std::string>& used);

// Helpers shared by layer implementations.
// A tensor's values in logical order (NCHW, KCRS: runtime/core/layout_order.h), whatever its
// layout stores them in; and back, checking dtype and shape.
HostTensor to_host(Backend& backend, const Tensor& t);
void from_host(Backend& backend, const HostTensor& h, Tensor& t, const std::string& name);
// Reads `prefix + name` from `in` into `t`; throws InvalidArgument if missing or mismatched.
void load_entry(Backend& backend, const StateDict& in, const std::string& key, Tensor& t,
                std::vector<std::string>& used);

}  // namespace dlb
