#include "runtime/nn/layer.h"

#include <fmt/format.h>

#include "runtime/core/error.h"

namespace dlb {

HostTensor to_host(Backend& backend, const Tensor& t) {
  HostTensor h{t.dtype(), t.shape(), std::vector<uint8_t>(t.bytes())};
  backend.copy_to_host(t, h.bytes.data());
  return h;
}

void from_host(Backend& backend, const HostTensor& h, Tensor& t, const std::string& name) {
  if (h.dtype != t.dtype() || h.shape != t.shape()) {
    throw InvalidArgument(fmt::format("{}: expected {} {}, found {} {}", name,
                                      dtype_name(t.dtype()), t.shape().str(), dtype_name(h.dtype),
                                      h.shape.str()));
  }
  backend.copy_from_host(h.bytes.data(), t);
}

void load_entry(Backend& backend, const StateDict& in, const std::string& key, Tensor& t,
                std::vector<std::string>& used) {
  auto it = in.find(key);
  if (it == in.end()) throw InvalidArgument(fmt::format("missing tensor '{}'", key));
  from_host(backend, it->second, t, key);
  used.push_back(key);
}

Tensor DirectTensors::param(const std::string& name, const Shape& shape, DType dtype) {
  return backend_.empty(shape, dtype, MemCategory::kWeights, name);
}

Tensor DirectTensors::buffer(const std::string& name, const Shape& shape, DType dtype) {
  return backend_.empty(shape, dtype, MemCategory::kWeights, name);
}

Tensor DirectTensors::compute_copy(const std::string& name, const Tensor& value, DType dtype) {
  if (value.dtype() == dtype) return value;
  return backend_.empty(value.shape(), dtype, MemCategory::kWeights, name + " (compute copy)");
}

void refresh_compute_copies(Backend& backend, const std::vector<Param*>& params) {
  for (Param* p : params) {
    if (p->has_compute_copy()) backend.cast(p->value, p->compute);
  }
}

Tensor DirectTensors::saved(const std::string& name, const Shape& shape, DType dtype) {
  return backend_.empty(shape, dtype, MemCategory::kActivations, name);
}

void setup_standalone(Layer& layer, Backend& backend, const std::vector<Shape>& in, Rng& rng,
                      const PrecisionPolicy& policy) {
  DirectTensors tensors(backend);
  LayerSetup s{backend, in, rng, policy, tensors};
  layer.setup(s);
  refresh_compute_copies(backend, layer.params());
  for (Param* p : layer.params()) {
    p->grad = backend.empty(p->value.shape(), policy.gradients, MemCategory::kGradients, p->name);
  }
}

void Layer::save_state(Backend& backend, const std::string& prefix, StateDict& out) {
  for (Param* p : params()) out[prefix + p->name] = to_host(backend, p->value);
}

void Layer::load_state(Backend& backend, const std::string& prefix, const StateDict& in,
                       std::vector<std::string>& used) {
  for (Param* p : params()) load_entry(backend, in, prefix + p->name, p->value, used);
}

}  // namespace dlb
