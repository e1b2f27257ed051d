// A tensor shape: up to a handful of dimensions, printed like PyTorch's torch.Size.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace dlb {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  size_t rank() const { return dims_.size(); }
  int64_t operator[](size_t i) const { return dims_[i]; }
  int64_t& operator[](size_t i) { return dims_[i]; }
  // The product of the dimensions; InvalidArgument when it does not fit 64 bits.
  int64_t numel() const;
  const std::vector<int64_t>& dims() const { return dims_; }
  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return dims_ != o.dims_; }
  std::string str() const;  // "[16, 3, 64, 64]"

 private:
  std::vector<int64_t> dims_;
};

}  // namespace dlb
