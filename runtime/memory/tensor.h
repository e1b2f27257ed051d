// A tensor is a typed, shaped view on an allocator-owned Buffer, on whichever device the buffer
// lives. Layers and backends pass tensors; only backends dereference them.
#pragma once
#include <memory>

#include "runtime/core/dtype.h"
#include "runtime/core/shape.h"
#include "runtime/memory/allocator.h"

namespace dlb {

class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<Buffer> buffer, Shape shape, DType dtype, Layout layout = Layout::kNCHW,
         size_t byte_offset = 0);

  bool defined() const { return buffer_ != nullptr; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Layout layout() const { return layout_; }
  int64_t numel() const { return shape_.numel(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  int64_t dim(size_t i) const { return shape_[i]; }

  void* raw() const { return static_cast<char*>(buffer_->data()) + offset_; }
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw());
  }

  // Same bytes, another shape of the same element count.
  Tensor reshaped(Shape shape) const;
  // Same bytes, read in another layout (the layout of a 4-D tensor says where element
  // (n, c, h, w) is stored: NCHW, or NHWC, channels last; other ranks are NCHW).
  Tensor with_layout(Layout layout) const;
  // Elements [begin, begin + count) of the flattened tensor, as a 1-D view.
  Tensor slice_flat(int64_t begin, int64_t count) const;
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }

 private:
  std::shared_ptr<Buffer> buffer_;
  size_t offset_ = 0;
  Shape shape_;
  DType dtype_ = DType::kF32;
  Layout layout_ = Layout::kNCHW;
};

}  // namespace dlb
