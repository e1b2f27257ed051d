#include "runtime/memory/tensor.h"

#include <fmt/format.h>

#include "runtime/core/error.h"

namespace dlb {

Tensor::Tensor(std::shared_ptr<Buffer> buffer, Shape shape, DType dtype, Layout layout,
               size_t byte_offset)
    : buffer_(std::move(buffer)),
      offset_(byte_offset),
      shape_(std::move(shape)),
      dtype_(dtype),
      layout_(layout) {
  if (buffer_ && offset_ + bytes() > buffer_->bytes()) {
    throw InvalidArgument(
        fmt::format("tensor of shape {} ({} bytes at offset {}) overruns its "
                    "buffer of {} bytes",
                    shape_.str(), bytes(), offset_, buffer_->bytes()));
  }
}

Tensor Tensor::reshaped(Shape shape) const {
  if (shape.numel() != numel()) {
    throw InvalidArgument(fmt::format("cannot view shape {} as {}", shape_.str(), shape.str()));
  }
  return Tensor(buffer_, std::move(shape), dtype_, layout_, offset_);
}

Tensor Tensor::with_layout(Layout layout) const {
  return Tensor(buffer_, shape_, dtype_, layout, offset_);
}

Tensor Tensor::slice_flat(int64_t begin, int64_t count) const {
  if (begin < 0 || count < 0 || begin + count > numel()) {
    throw InvalidArgument(fmt::format("slice [{}, {}) is outside a tensor of {} elements", begin,
                                      begin + count, numel()));
  }
  return Tensor(buffer_, Shape{count}, dtype_, layout_, offset_ + begin * dtype_size(dtype_));
}

}  // namespace dlb
