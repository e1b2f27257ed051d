#include "runtime/core/checked.h"

#include <fmt/format.h>

#include "runtime/core/error.h"

namespace dlb {
namespace {
template <typename T>
[[noreturn]] void overflow(T a, T b, char op, std::string_view what) {
  throw InvalidArgument(fmt::format("{}: {} {} {} does not fit 64 bits", what, a, op, b));
}
}  // namespace

int64_t checked_mul(int64_t a, int64_t b, std::string_view what) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) overflow(a, b, '*', what);
  return r;
}

int64_t checked_add(int64_t a, int64_t b, std::string_view what) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) overflow(a, b, '+', what);
  return r;
}

uint64_t checked_mul(uint64_t a, uint64_t b, std::string_view what) {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) overflow(a, b, '*', what);
  return r;
}

uint64_t checked_add(uint64_t a, uint64_t b, std::string_view what) {
  uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) overflow(a, b, '+', what);
  return r;
}

}  // namespace dlb
