#include "runtime/core/shape.h"

#include <fmt/format.h>

#include "runtime/core/error.h"

namespace dlb {

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t d : dims_) {
    if (__builtin_mul_overflow(n, d, &n)) {
      throw InvalidArgument(
          fmt::format("a tensor of shape {} has more elements than 64 bits can count", str()));
    }
  }
  return n;
}

std::string Shape::str() const {
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

}  // namespace dlb
