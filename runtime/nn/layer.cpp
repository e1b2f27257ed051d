#include "runtime/nn/layer.h"

#include <fmt/format.h>

#include <utility>

#include "runtime/core/error.h"
#include "runtime/core/layout_order.h"

namespace dlb {

HostTensor to_host(Backend& backend, const Tensor& t) {
  std::vector<uint8_t> stored(t.bytes());
  backend.copy_to_host(t, stored.data());
  return {t.dtype(), t.shape(),
          to_logical_order(t.layout(), t.shape(), dtype_size(t.dtype()), std::move(stored))};
}

void from_host(Backend& backend, const HostTensor& h, Tensor& t, const std::string& name) {
  // A scalar (batch norm's num_batches_tracked) may come as one element of rank 1.
  const bool scalar = t.shape().rank() == 0 && h.shape.numel() == 1;
  if (h.dtype != t.dtype() || (h.shape != t.shape() && !scalar)) {
    throw InvalidArgument(fmt::format("{}: expected {} {}, found {} {}", name,
                                      dtype_name(t.dtype()), t.shape().str(), dtype_name(h.dtype),
                                      h.shape.str()));
  }
  // Most tensors are stored in logical order: copied as they come.
  if (scalar || t.layout() == Layout::kNCHW || t.shape().rank() != 4) {
    return backend.copy_from_host(h.bytes.data(), t);
  }
  const std::vector<uint8_t> stored =
      to_stored_order(t.layout(), t.shape(), dtype_size(t.dtype()), h.bytes);
  backend.copy_from_host(stored.data(), t);
}

void load_entry(Backend& backend, const StateDict& in, const std::string& key, Tensor& t,
                std::vector<std::string>& used) {
  auto it = in.find(key);
  if (it == in.end()) throw InvalidArgument(fmt::format("missing tensor '{}'", key));
  from_host(backend, it->second, t, key);
  used.push_back(key);
}

void LayerDeclaration::param(const std::string& name, const Shape& shape, DType dtype,
                             Layout layout) {
  TensorRequest r{name, TensorKind::kParam, shape, dtype, false};
  r.layout = layout;
  requests_.push_back(std::move(r));
}

void LayerDeclaration::buffer(const std::string& name, const Shape& shape, DType dtype) {
  requests_.push_back({name, TensorKind::kBuffer, shape, dtype, false});
}

void LayerDeclaration::saved(const std::string& name, const Shape& shape, DType dtype) {
  requests_.push_back({name, TensorKind::kSaved, shape, dtype, false});
}

void LayerDeclaration::scratch(const std::string& name, const Shape& shape, DType dtype,
                               bool over_output_gradient) {
  requests_.push_back({name, TensorKind::kScratch, shape, dtype, false, over_output_gradient});
}

void LayerDeclaration::compute_copy(const std::string& name, DType dtype) {
  for (const TensorRequest& r : requests_) {
    if (r.kind != TensorKind::kParam || r.compute_copy || r.name != name) continue;
    if (r.dtype == dtype) return;
    TensorRequest copy{name, TensorKind::kParam, r.shape, dtype, true};
    // Stored as the value it is rounded from, element for element, but where the backend's
    // 16-bit passes read blocked weights in another order (BackendTraits::blocked_weight_copy).
    copy.layout = r.layout == Layout::kOIhw16i16o ? traits.blocked_weight_copy : r.layout;
    requests_.push_back(std::move(copy));
    return;
  }
  throw InvalidArgument(fmt::format("a compute copy of '{}', which is not a parameter", name));
}

void LayerTensors::add(const TensorRequest& request, int id) {
  for (Entry& e : entries_) {
    if (e.name != request.name) continue;
    if (!request.compute_copy) {
      throw InvalidArgument(fmt::format("the layer declares '{}' twice", request.name));
    }
    e.copy = id;
    return;
  }
  if (request.compute_copy) {
    throw InvalidArgument(
        fmt::format("a compute copy of '{}', which is not declared before", request.name));
  }
  entries_.push_back({request.name, request.kind, id, -1, -1});
}

void LayerTensors::add_grad(const std::string& param, int id) {
  for (Entry& e : entries_) {
    if (e.name == param && e.kind == TensorKind::kParam) {
      e.grad = id;
      return;
    }
  }
  throw InvalidArgument(fmt::format("a gradient of '{}', which is not a parameter", param));
}

const LayerTensors::Entry* LayerTensors::find(const std::string& name) const {
  for (const Entry& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

const LayerTensors::Entry& LayerTensors::at(const std::string& name) const {
  const Entry* e = find(name);
  if (!e) throw InvalidArgument(fmt::format("the layer did not declare a tensor '{}'", name));
  return *e;
}

Tensor& LayerTensors::bound(int id, const std::string& name) const {
  if (!table_ || id < 0 || static_cast<size_t>(id) >= table_->size()) {
    throw InvalidArgument(fmt::format("the layer's tensor '{}' is not bound", name));
  }
  return (*table_)[static_cast<size_t>(id)];
}

Tensor& LayerTensors::get(const std::string& name) const { return bound(at(name).value, name); }

const Tensor& LayerTensors::compute_copy(const std::string& name) const {
  const Entry& e = at(name);
  return bound(e.copy >= 0 ? e.copy : e.value, name);
}

Tensor& LayerTensors::grad(const std::string& name) const {
  return bound(at(name).grad, name + ".grad");
}

std::vector<std::string> LayerTensors::param_names() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_)
    if (e.kind == TensorKind::kParam) out.push_back(e.name);
  return out;
}

Param LayerTensors::param(const std::string& name) const {
  const Entry& e = at(name);
  return {name, get(name), e.grad >= 0 ? grad(name) : Tensor{},
          e.copy >= 0 ? bound(e.copy, name) : Tensor{}};
}

std::vector<LayerTensors::Stored> LayerTensors::stored() const {
  std::vector<Stored> out;
  for (const Entry& e : entries_)
    if (e.kind == TensorKind::kParam || e.kind == TensorKind::kBuffer)
      out.push_back({e.name, e.value});
  return out;
}

BackendTraits BackendTraits::of(Backend& backend, const OpTypes& types) {
  BackendTraits t;
  t.activation_layout = backend.activation_layout(types);
  t.fuses_batch_norm_relu = backend.fuses_batch_norm_relu(types);
  t.fuses_conv_relu = backend.fuses_conv_relu(types);
  t.blocks_conv_weights = backend.blocks_conv_weights(types);
  t.blocked_weight_copy = backend.conv_weight_copy_layout(types, Layout::kOIhw16i16o);
  t.guarded = backend.allocator().guarded();
  t.saves_pool_argmax = backend.saves_pool_argmax();
  return t;
}

void refresh_compute_copy(Backend& backend, const Param& p) {
  if (!p.has_compute_copy()) return;
  Tensor copy = p.compute;  // a handle: the cast writes the copy's storage
  backend.cast(p.value, copy);
}

StandaloneTensors setup_standalone(Layer& layer, Backend& backend, const std::vector<Shape>& in,
                                   Rng& rng, const PrecisionPolicy& policy) {
  LayerDeclaration declared(in, policy, BackendTraits::of(backend, OpTypes::of(policy)));
  layer.declare(declared);
  layer.require(backend, policy);
  StandaloneTensors out{std::make_unique<BoundTable>(), {}};
  out.tensors = LayerTensors(out.table.get());
  BoundTable& table = *out.table;
  for (const TensorRequest& r : declared.requests()) {
    const MemCategory category = r.kind == TensorKind::kSaved || r.kind == TensorKind::kScratch
                                     ? MemCategory::kActivations
                                     : MemCategory::kWeights;
    table.push_back(backend.empty(r.shape, r.dtype, category,
                                  r.compute_copy ? r.name + " (compute copy)" : r.name, r.layout));
    out.tensors.add(r, static_cast<int>(table.size()) - 1);
  }
  for (const TensorRequest& r : declared.requests()) {
    if (r.kind != TensorKind::kParam || r.compute_copy) continue;
    table.push_back(
        backend.empty(r.shape, policy.gradients, MemCategory::kGradients, r.name, r.layout));
    out.tensors.add_grad(r.name, static_cast<int>(table.size()) - 1);
  }
  layer.plan(LayerPlanning{backend, in, policy});
  LayerSetup s{backend, in, rng, policy, out.tensors};
  layer.setup(s);
  for (const std::string& name : out.tensors.param_names())
    refresh_compute_copy(backend, out.tensors.param(name));
  return out;
}

void save_layer_state(Backend& backend, const LayerTensors& tensors, const std::string& prefix,
                      StateDict& out) {
  for (const LayerTensors::Stored& s : tensors.stored())
    out[prefix + s.name] = to_host(backend, tensors.get(s.name));
}

void load_layer_state(Backend& backend, const LayerTensors& tensors, const std::string& prefix,
                      const StateDict& in, std::vector<std::string>& used) {
  for (const LayerTensors::Stored& s : tensors.stored())
    load_entry(backend, in, prefix + s.name, tensors.get(s.name), used);
}

}  // namespace dlb
