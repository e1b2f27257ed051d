#include "runtime/backend/cpu/f32_views.h"

#include <fmt/format.h>

#include <vector>

#include "runtime/backend/cpu/parallel.h"
#include "runtime/backend/cpu/pointwise_loops.h"
#include "runtime/core/error.h"
#include "runtime/core/stored_float.h"

namespace dlb {

bool is_16bit(DType t) { return t == DType::kF16 || t == DType::kBF16; }

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
  const auto* from = static_cast<const uint8_t*>(src.raw());
  auto* to = static_cast<uint8_t*>(dst.raw());
  const int64_t from_size = dtype_size(src.dtype()), to_size = dtype_size(dst.dtype());
  const CpuIsa isa = host_cpu_isa();
  const auto widen = [isa](DType t, const void* in, int64_t count, float* out) {
    with_stored_float(t, "convert", [&](auto e) {
      using T = decltype(e);
      pointwise_loops<T>(isa).widen(static_cast<const T*>(in), out, count);
    });
  };
  const auto narrow = [isa](const float* in, int64_t count, DType t, void* out) {
    with_stored_float(t, "convert", [&](auto e) {
      using T = decltype(e);
      pointwise_loops<T>(isa).narrow(in, static_cast<T*>(out), count);
    });
  };
  // Elementwise, so converted in one block per thread.
  parallel_blocks(n, kParallelElements, [&](int64_t begin, int64_t end) {
    const void* in = from + begin * from_size;
    void* out = to + begin * to_size;
    if (src.dtype() == DType::kF32) {
      narrow(static_cast<const float*>(in), end - begin, dst.dtype(), out);
    } else if (dst.dtype() == DType::kF32) {
      widen(src.dtype(), in, end - begin, static_cast<float*>(out));
    } else {  // one 16-bit type into the other, through f32 (exact on the way in)
      std::vector<float> wide(static_cast<size_t>(end - begin));
      widen(src.dtype(), in, end - begin, wide.data());
      narrow(wide.data(), end - begin, dst.dtype(), out);
    }
  });
}

F32Views::~F32Views() {
  if (std::uncaught_exceptions() > exceptions_) return;
  for (View& v : views_) {
    if (v.narrow) convert(v.wide, *v.narrow);
  }
}

Tensor& F32Views::view(const Tensor& t, bool read, Tensor* write_back) {
  // Converted element for element, so stored in the tensor's own layout.
  Tensor wide = memory_.empty(t.shape(), DType::kF32, MemCategory::kWorkspace,
                              "f32 copy of a 16-bit tensor", t.layout());
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

LayoutViews::~LayoutViews() {
  if (std::uncaught_exceptions() > exceptions_) return;
  for (Copy& c : copies_) {
    if (c.write_back) backend_.cast(c.copy, *c.write_back);
  }
}

Tensor& LayoutViews::copy(const Tensor& t, bool read, Tensor* write_back) {
  Tensor c = backend_.empty(t.shape(), t.dtype(), MemCategory::kWorkspace,
                            "operand in its op's layout", layout_);
  if (read) backend_.cast(t, c);
  copies_.push_back({std::move(c), write_back});
  return copies_.back().copy;
}

}  // namespace dlb
