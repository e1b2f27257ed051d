#include "runtime/nn/bound_step.h"

#include <fmt/format.h>

#include "runtime/core/error.h"

namespace dlb {

namespace {

// A view's tensor: `base`'s bytes from the view's offset, in its shape and layout.
Tensor view_of(const Tensor& base, const TensorInfo& view) {
  return base.slice_flat(view.offset, view.shape.numel())
      .reshaped(view.shape)
      .with_layout(view.layout);
}

}  // namespace

BoundStep::BoundStep(Allocator& memory, const MemoryPlan& plan,
                     const std::vector<TensorInfo>& tensors)
    : table_(std::make_shared<BoundTable>(tensors.size())), tensors_(tensors) {
  if (plan.buffer_of.size() != tensors.size()) {
    throw InvalidArgument(fmt::format("the memory plan places {} tensors; the table has {}",
                                      plan.buffer_of.size(), tensors.size()));
  }
  std::vector<std::shared_ptr<Buffer>> buffers;
  for (const PlannedBuffer& b : plan.buffers)
    buffers.push_back(memory.allocate(b.bytes, b.category, b.name));
  BoundTable& table = *table_;
  for (size_t id = 0; id < tensors.size(); ++id) {
    const TensorInfo& info = tensors[id];
    const int b = plan.buffer_of[id];
    table[id] = b >= 0
                    ? Tensor(buffers.at(b), info.shape, info.dtype, info.layout, plan.offset_of[id])
                    : view_of(table.at(info.alias_of), info);
  }
}

Tensor& BoundStep::tensor(int id) const {
  if (!table_ || id < 0 || static_cast<size_t>(id) >= table_->size()) {
    throw InvalidArgument(
        fmt::format("tensor {} is not in the bound step ({} tensors)", id, size()));
  }
  return (*table_)[static_cast<size_t>(id)];
}

Param BoundStep::param(const ParamIds& p) const {
  return {p.name, tensor(p.value), tensor(p.grad), p.compute >= 0 ? tensor(p.compute) : Tensor{}};
}

void BoundStep::rebind(int id, const Tensor& t) {
  Tensor& now = tensor(id);
  if (t.shape() != now.shape() || t.dtype() != now.dtype() || t.layout() != now.layout()) {
    throw InvalidArgument(fmt::format("{} is {} {} {}, not {} {} {}", tensors_.at(id).name,
                                      dtype_name(now.dtype()), now.shape().str(),
                                      layout_name(now.layout()), dtype_name(t.dtype()),
                                      t.shape().str(), layout_name(t.layout())));
  }
  now = t;
  // A view follows the tensor it views, which comes before it in the table (a view of a view
  // follows its source).
  std::vector<char> follows(tensors_.size(), 0);
  follows[static_cast<size_t>(id)] = 1;
  BoundTable& table = *table_;
  for (size_t v = static_cast<size_t>(id) + 1; v < tensors_.size(); ++v) {
    const int base = tensors_[v].alias_of;
    if (base < 0 || !follows[static_cast<size_t>(base)]) continue;
    follows[v] = 1;
    table[v] = view_of(table[static_cast<size_t>(base)], tensors_[v]);
  }
}

}  // namespace dlb
