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

void LayerDeclaration::param(const std::string& name, const Shape& shape, DType dtype) {
  requests_.push_back({name, TensorKind::kParam, shape, dtype, false});
}

void LayerDeclaration::buffer(const std::string& name, const Shape& shape, DType dtype) {
  requests_.push_back({name, TensorKind::kBuffer, shape, dtype, false});
}

void LayerDeclaration::saved(const std::string& name, const Shape& shape, DType dtype) {
  requests_.push_back({name, TensorKind::kSaved, shape, dtype, false});
}

void LayerDeclaration::compute_copy(const std::string& name, DType dtype) {
  for (const TensorRequest& r : requests_) {
    if (r.kind != TensorKind::kParam || r.compute_copy || r.name != name) continue;
    if (r.dtype != dtype) requests_.push_back({name, TensorKind::kParam, r.shape, dtype, true});
    return;
  }
  throw InvalidArgument(fmt::format("a compute copy of '{}', which is not a parameter", name));
}

void LayerTensors::add(const TensorRequest& request, Tensor t) {
  (request.compute_copy ? copies_ : by_name_)[request.name] = std::move(t);
}

Tensor LayerTensors::get(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) {
    throw InvalidArgument(fmt::format("the layer did not declare a tensor '{}'", name));
  }
  return it->second;
}

Tensor LayerTensors::compute_copy(const std::string& name) const {
  auto it = copies_.find(name);
  return it != copies_.end() ? it->second : get(name);
}

BackendTraits BackendTraits::of(Backend& backend, const OpTypes& types) {
  return {backend.activation_layout(types), backend.fuses_batch_norm_relu(types),
          backend.allocator().guarded()};
}

void refresh_compute_copies(Backend& backend, const std::vector<Param*>& params) {
  for (Param* p : params) {
    if (p->has_compute_copy()) backend.cast(p->value, p->compute);
  }
}

void setup_standalone(Layer& layer, Backend& backend, const std::vector<Shape>& in, Rng& rng,
                      const PrecisionPolicy& policy) {
  LayerDeclaration declared(in, policy);
  layer.declare(declared);
  LayerTensors tensors;
  for (const TensorRequest& r : declared.requests()) {
    const MemCategory category =
        r.kind == TensorKind::kSaved ? MemCategory::kActivations : MemCategory::kWeights;
    tensors.add(r, backend.empty(r.shape, r.dtype, category,
                                 r.compute_copy ? r.name + " (compute copy)" : r.name));
  }
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
