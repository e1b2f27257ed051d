// Element-wise sums: the residual add and gradient accumulation at a fork in the graph.
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/f32_views.h"
#include "runtime/backend/cpu/parallel.h"

namespace dlb {

void CpuBackend::add(const Tensor& a_s, const Tensor& b_s, Tensor& y_s) {
  F32Views f32(*this);
  const Tensor& a = f32.in(a_s);
  const Tensor& b = f32.in(b_s);
  Tensor& y = f32.out(y_s);
  check_same_shape(a, b, "add");
  check_same_shape(a, y, "add");
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  float* yp = y.data<float>();
  const int64_t n = a.numel();  // not numel() per element: it is out of line, and checked
  parallel_blocks(n, kParallelElements, [=](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) yp[i] = ap[i] + bp[i];
  });
}

void CpuBackend::accumulate(const Tensor& x_s, Tensor& y_s) {
  F32Views f32(*this);
  const Tensor& x = f32.in(x_s);
  Tensor& y = f32.inout(y_s);
  check_same_shape(x, y, "accumulate");
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const int64_t n = x.numel();
  parallel_blocks(n, kParallelElements, [=](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) yp[i] += xp[i];
  });
}

}  // namespace dlb
