// A step's tensors, stored (docs/architecture.md, "The step"): every tensor of a table (a step
// program's: the model's, then the step's) made in the bytes a MemoryPlan gives it. A BoundStep
// owns that storage. Graph::bind returns one: the model's layers borrow its table while it lives
// (the graph holds it weakly, and is no longer set up once it is gone), and the step's other
// runners (the loss, the optimizer, the sync policy, the input slots) look their tensors up in
// it by id.
#pragma once
#include <memory>
#include <vector>

#include "runtime/memory/allocator.h"
#include "runtime/nn/layer.h"
#include "runtime/nn/memory_plan.h"
#include "runtime/nn/schedule.h"

namespace dlb {

class BoundStep {
 public:
  BoundStep() = default;
  // Allocates `plan`'s buffers from `memory` and makes each tensor of `tensors` (which `plan`
  // places) in them, a view in its base's bytes.
  BoundStep(Allocator& memory, const MemoryPlan& plan, const std::vector<TensorInfo>& tensors);
  // One owner: a copy would keep the storage, and the graph that borrows it set up, after it.
  BoundStep(BoundStep&&) noexcept = default;
  BoundStep& operator=(BoundStep&&) noexcept = default;
  BoundStep(const BoundStep&) = delete;
  BoundStep& operator=(const BoundStep&) = delete;

  size_t size() const { return table_ ? table_->size() : 0; }
  // Tensor `id`, as stored. The table is storage: a const step lends its tensors for writing,
  // as a const pointer does its pointee.
  Tensor& tensor(int id) const;
  // A parameter's tensors, as stored (its compute copy empty where it has none).
  Param param(const ParamIds& p) const;
  // Makes tensor `id` `t` (its shape, dtype and layout), and every view of it a view of `t`: the
  // input slots' second buffer. InvalidArgument where `t` is stored otherwise.
  void rebind(int id, const Tensor& t);
  // The table, for those that borrow it (the graph's layers): its entries stay where they are
  // while the step lives, moved or not.
  const std::shared_ptr<BoundTable>& table() const { return table_; }

 private:
  std::shared_ptr<BoundTable> table_;
  std::vector<TensorInfo> tensors_;  // how each tensor is a view (rebind)
};

}  // namespace dlb
