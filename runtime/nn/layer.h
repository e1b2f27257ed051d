// The layer contract (Caffe's, adapted): shape inference, setup (parameters and plans, for one
// fixed input shape), forward, and backward as two separate calls -- the weight gradient and the
// data gradient -- so a scheduler may order them and reuse memory between them.
#pragma once
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/core/rng.h"
#include "runtime/core/tensor.h"
#include "runtime/trace/tracer.h"

namespace dlb {

// A trainable tensor, its gradient, and its torchvision state_dict name within the layer. Layers
// allocate the value; the gradient is a view the owner assigns (the Graph's flat buffer), which
// lets all gradients share one allocation that collectives reduce in buckets.
struct Param {
  std::string name;  // "weight", "bias"
  Tensor value;
  Tensor grad;
};

// A host-side copy of a tensor, as state_dict entries and safetensors files hold them.
struct HostTensor {
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<uint8_t> bytes;
};
using StateDict = std::map<std::string, HostTensor>;

struct LayerContext {
  Backend& backend;
  bool training = true;
  uint64_t seed = 0;         // per step, for dropout
  Tracer* tracer = nullptr;  // spans of layer passes, when set and inside its window
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string_view kind() const = 0;

  // Output shape for these input shapes; throws InvalidArgument if they do not fit the layer.
  virtual Shape output_shape(const std::vector<Shape>& in) const = 0;
  // Allocates parameter values (initialised from rng) and plans for exactly these input shapes;
  // not the gradients (see Param).
  virtual void setup(Backend& backend, const std::vector<Shape>& in, Rng& rng) {
    (void)backend, (void)in, (void)rng;
  }

  virtual void forward(const LayerContext& ctx, const std::vector<const Tensor*>& x, Tensor& y) = 0;
  // Writes dx[i] (overwriting) for each non-null entry.
  virtual void backward_data(const LayerContext& ctx, const std::vector<const Tensor*>& x,
                             const Tensor& y, const Tensor& dy, const std::vector<Tensor*>& dx) = 0;
  // Writes the parameter gradients (overwriting). Layers without parameters do nothing.
  virtual void backward_weights(const LayerContext& ctx, const std::vector<const Tensor*>& x,
                                const Tensor& y, const Tensor& dy) {
    (void)ctx, (void)x, (void)y, (void)dy;
  }

  virtual std::vector<Param*> params() { return {}; }
  // Trainable element count, known before setup (for listings and plans).
  virtual int64_t num_params() const { return 0; }
  // Parameters and buffers (running statistics) in state_dict order, named within the layer.
  virtual void save_state(Backend& backend, const std::string& prefix, StateDict& out);
  // Takes this layer's entries from `in`, checking dtype and shape; records the names it used.
  virtual void load_state(Backend& backend, const std::string& prefix, const StateDict& in,
                          std::vector<std::string>& used);

  // Forward FLOPs for these input shapes (a multiply-add is 2). conv and linear count their
  // matrix products; other layers count one operation per element they compute.
  virtual double forward_flops(const std::vector<Shape>& in) const = 0;
  // True for conv and linear, whose backward costs twice their forward.
  virtual bool is_matmul_layer() const { return false; }
};

// Gives each parameter of `layer` its own gradient buffer (for using a layer outside a Graph).
void allocate_gradients(Backend& backend, Layer& layer);

// Helpers shared by layer implementations.
HostTensor to_host(Backend& backend, const Tensor& t);
void from_host(Backend& backend, const HostTensor& h, Tensor& t, const std::string& name);
// Reads `prefix + name` from `in` into `t`; throws InvalidArgument if missing or mismatched.
void load_entry(Backend& backend, const StateDict& in, const std::string& key, Tensor& t,
                std::vector<std::string>& used);

}  // namespace dlb
