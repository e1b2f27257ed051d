// ReLU. Backward reads the output, so the input may be released or overwritten. Both run on the
// tensors as stored (f32, or 16-bit loaded into floats and rounded back on store): a ReLU only
// selects values, so the 16-bit results are the same bits as on f32 copies. The loops are
// pointwise_loops.h's.
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/f32_views.h"
#include "runtime/backend/cpu/parallel.h"
#include "runtime/backend/cpu/pointwise_loops.h"
#include "runtime/core/stored_float.h"

namespace dlb {
namespace {

template <typename T>
void relu(const Tensor& x, Tensor& y) {
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  const auto loop = pointwise_loops<T>(host_cpu_isa()).relu;
  parallel_blocks(x.numel(), kParallelElements,
                  [=](int64_t begin, int64_t end) { loop(xp + begin, yp + begin, end - begin); });
}

template <typename T>
void relu_grad(const Tensor& y, const Tensor& dy, Tensor& dx) {
  const T* yp = y.data<T>();
  const T* g = dy.data<T>();
  T* out = dx.data<T>();
  const auto loop = pointwise_loops<T>(host_cpu_isa()).relu_grad;
  parallel_blocks(y.numel(), kParallelElements, [=](int64_t begin, int64_t end) {
    loop(yp + begin, g + begin, out + begin, end - begin);
  });
}

}  // namespace

void CpuBackend::relu_forward(const Tensor& x_in, Tensor& y) {
  check_same_shape(x_in, y, "relu");
  LayoutViews as_y(*this, y.layout());
  const Tensor& x = as_y.in(x_in);
  if (stored_as_one({&x, &y}, "relu")) {
    with_stored_float(x.dtype(), "relu input", [&](auto t) { relu<decltype(t)>(x, y); });
    return;
  }
  F32Views f32(*this);
  const Tensor& xf = f32.in(x);
  Tensor& yf = f32.out(y);
  check_f32(xf, "relu input");
  check_f32(yf, "relu output");
  relu<float>(xf, yf);
}

void CpuBackend::relu_backward(const Tensor& y_in, const Tensor& dy_in, Tensor& dx) {
  check_same_shape(y_in, dy_in, "relu backward");
  check_same_shape(y_in, dx, "relu backward");
  LayoutViews as_dx(*this, dx.layout());
  const Tensor& y = as_dx.in(y_in);
  const Tensor& dy = as_dx.in(dy_in);
  if (stored_as_one({&y, &dy, &dx}, "relu backward")) {
    with_stored_float(y.dtype(), "relu output", [&](auto t) { relu_grad<decltype(t)>(y, dy, dx); });
    return;
  }
  F32Views f32(*this);
  const Tensor& yf = f32.in(y);
  const Tensor& dyf = f32.in(dy);
  Tensor& dxf = f32.out(dx);
  for (const Tensor* t : {&yf, &dyf, static_cast<const Tensor*>(&dxf)}) {
    check_f32(*t, "relu backward operand");
  }
  relu_grad<float>(yf, dyf, dxf);
}

}  // namespace dlb
