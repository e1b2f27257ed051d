// Row-major matrix multiply through OpenBLAS sgemm.
#include <cblas.h>
#include <fmt/format.h>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/f32_views.h"
#include "runtime/core/error.h"

namespace dlb {

// In f32 whatever the math (16-bit operands are widened, and c rounded back on store).
void CpuBackend::matmul(Precision /*math*/, bool trans_a, bool trans_b, float alpha,
                        const Tensor& a_s, const Tensor& b_s, float beta, Tensor& c_s) {
  F32Views f32(*this);
  const Tensor& a = f32.in(a_s);
  const Tensor& b = f32.in(b_s);
  Tensor& c = beta == 0.f ? f32.out(c_s) : f32.inout(c_s);
  check_f32(a, "matmul a");
  check_f32(b, "matmul b");
  check_f32(c, "matmul c");
  if (a.shape().rank() != 2 || b.shape().rank() != 2 || c.shape().rank() != 2) {
    throw InvalidArgument("matmul takes 2-D tensors");
  }
  const int64_t m = trans_a ? a.dim(1) : a.dim(0);
  const int64_t k = trans_a ? a.dim(0) : a.dim(1);
  const int64_t kb = trans_b ? b.dim(1) : b.dim(0);
  const int64_t n = trans_b ? b.dim(0) : b.dim(1);
  if (k != kb || c.dim(0) != m || c.dim(1) != n) {
    throw InvalidArgument(fmt::format("matmul shapes do not agree: {}{} x {}{} -> {}",
                                      a.shape().str(), trans_a ? "^T" : "", b.shape().str(),
                                      trans_b ? "^T" : "", c.shape().str()));
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a.data<float>(), a.dim(1),
              b.data<float>(), b.dim(1), beta, c.data<float>(), n);
}

}  // namespace dlb
