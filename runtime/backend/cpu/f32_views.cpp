#include "runtime/backend/cpu/f32_views.h"

#include <fmt/format.h>

#include "runtime/core/error.h"
#include "runtime/core/half.h"

namespace dlb {

bool is_16bit(DType t) { return t == DType::kF16 || t == DType::kBF16; }

namespace {

float load(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kF16:
      return f16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kBF16:
      return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

}  // namespace

void convert(const Tensor& src, Tensor& dst) {
  for (const Tensor* t : {&src, static_cast<const Tensor*>(&dst)}) {
    if (t->dtype() == DType::kI64) {
      throw InvalidArgument("convert: i64 tensors hold labels, not values to round");
    }
  }
  if (src.numel() != dst.numel()) {
    throw InvalidArgument(fmt::format("convert: {} elements into {}", src.numel(), dst.numel()));
  }
  const int64_t n = src.numel();
  const DType from = src.dtype();
  const void* s = src.raw();
  switch (dst.dtype()) {
    case DType::kF16: {
      auto* d = dst.data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) d[i] = float_to_f16(load(s, from, i));
      break;
    }
    case DType::kBF16: {
      auto* d = dst.data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(load(s, from, i));
      break;
    }
    default: {
      float* d = dst.data<float>();
      for (int64_t i = 0; i < n; ++i) d[i] = load(s, from, i);
    }
  }
}

F32Views::~F32Views() {
  if (std::uncaught_exceptions() > exceptions_) return;
  for (View& v : views_) {
    if (v.narrow) convert(v.wide, *v.narrow);
  }
}

float F32Views::stored_value(float x, DType t) {
  switch (t) {
    case DType::kF16:
      return f16_to_float(float_to_f16(x));
    case DType::kBF16:
      return bf16_to_float(float_to_bf16(x));
    default:
      return x;
  }
}

Tensor& F32Views::view(const Tensor& t, bool read, Tensor* write_back) {
  Tensor wide =
      memory_.empty(t.shape(), DType::kF32, MemCategory::kWorkspace, "f32 copy of a 16-bit tensor");
  if (read) convert(t, wide);
  views_.push_back({std::move(wide), write_back});
  return views_.back().wide;
}

const Tensor& F32Views::in(const Tensor& t) {
  return t.defined() && is_16bit(t.dtype()) ? view(t, true, nullptr) : t;
}

Tensor& F32Views::out(Tensor& t) {
  return t.defined() && is_16bit(t.dtype()) ? view(t, false, &t) : t;
}

Tensor& F32Views::inout(Tensor& t) {
  return t.defined() && is_16bit(t.dtype()) ? view(t, true, &t) : t;
}

}  // namespace dlb
