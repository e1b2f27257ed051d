// Element-wise sums: the residual add and gradient accumulation at a fork in the graph, on the
// tensors as stored (f32, or 16-bit loaded into floats and rounded once on store: the same bits
// as on f32 copies of them).
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/f32_views.h"
#include "runtime/backend/cpu/parallel.h"
#include "runtime/backend/cpu/pointwise_loops.h"
#include "runtime/core/stored_float.h"

namespace dlb {
namespace {

template <typename T>
void sum(const Tensor& a, const Tensor& b, Tensor& y) {
  const T* ap = a.data<T>();
  const T* bp = b.data<T>();
  T* yp = y.data<T>();
  const auto loop = pointwise_loops<T>(host_cpu_isa()).sum;
  parallel_blocks(a.numel(), kParallelElements, [=](int64_t begin, int64_t end) {
    loop(ap + begin, bp + begin, yp + begin, end - begin);
  });
}

}  // namespace

void CpuBackend::add(const Tensor& a_in, const Tensor& b_in, Tensor& y) {
  check_same_shape(a_in, b_in, "add");
  check_same_shape(a_in, y, "add");
  LayoutViews as_y(*this, y.layout());
  const Tensor& a = as_y.in(a_in);
  const Tensor& b = as_y.in(b_in);
  if (stored_as_one({&a, &b, &y}, "add")) {
    with_stored_float(a.dtype(), "add input", [&](auto t) { sum<decltype(t)>(a, b, y); });
    return;
  }
  F32Views f32(*this);
  const Tensor& af = f32.in(a);
  const Tensor& bf = f32.in(b);
  Tensor& yf = f32.out(y);
  for (const Tensor* t : {&af, &bf, static_cast<const Tensor*>(&yf)}) check_f32(*t, "add operand");
  sum<float>(af, bf, yf);
}

// y += x: the sum of y and x, into y.
void CpuBackend::accumulate(const Tensor& x_in, Tensor& y) {
  check_same_shape(x_in, y, "accumulate");
  LayoutViews as_y(*this, y.layout());
  const Tensor& x = as_y.in(x_in);
  if (stored_as_one({&x, &y}, "accumulate")) {
    with_stored_float(x.dtype(), "accumulate input", [&](auto t) { sum<decltype(t)>(y, x, y); });
    return;
  }
  F32Views f32(*this);
  const Tensor& xf = f32.in(x);
  Tensor& yf = f32.inout(y);
  check_f32(xf, "accumulate input");
  check_f32(yf, "accumulate output");
  sum<float>(yf, xf, yf);
}

}  // namespace dlb
