// Row-major matrix multiply through oneDNN (matmul_onednn.h): bf16 matrices natively where this CPU
// multiplies bf16, everything else in f32 (16-bit matrices on f32 copies); OpenBLAS sgemm where
// oneDNN has only its reference loops for an f32 product.
#include <cblas.h>
#include <fmt/format.h>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/f32_views.h"
#include "runtime/backend/cpu/matmul_onednn.h"
#include "runtime/backend/cpu/onednn_engine.h"
#include "runtime/core/error.h"

namespace dlb {
namespace {

bool all_bf16(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts) {
    if (t->dtype() != DType::kBF16) return false;
  }
  return true;
}

// The product's dimensions, once its operands' shapes are checked to agree.
MatrixProduct product_of(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b,
                         float beta, const Tensor& c) {
  for (const Tensor* t : {&a, &b, &c}) {
    if (!t->defined()) throw InvalidArgument("matmul: tensor is not allocated");
  }
  if (a.shape().rank() != 2 || b.shape().rank() != 2 || c.shape().rank() != 2) {
    throw InvalidArgument("matmul takes 2-D tensors");
  }
  MatrixProduct p{trans_a,
                  trans_b,
                  trans_a ? a.dim(1) : a.dim(0),
                  trans_b ? b.dim(0) : b.dim(1),
                  trans_a ? a.dim(0) : a.dim(1),
                  alpha,
                  beta};
  const int64_t kb = trans_b ? b.dim(1) : b.dim(0);
  if (p.k != kb || c.dim(0) != p.m || c.dim(1) != p.n) {
    throw InvalidArgument(fmt::format("matmul shapes do not agree: {}{} x {}{} -> {}",
                                      a.shape().str(), trans_a ? "^T" : "", b.shape().str(),
                                      trans_b ? "^T" : "", c.shape().str()));
  }
  return p;
}

}  // namespace

// bf16 wherever the CPU multiplies bf16 (a product shape oneDNN has only reference loops for would
// still compute on f32 copies; no model's does).
ProductArithmetic CpuBackend::matmul_arithmetic(const OpTypes& t) const {
  if (native_bf16(t)) {
    return {DType::kBF16, true};
  }
  return {};
}

// bf16 operands natively where oneDNN multiplies them (rounded once on store); any other in f32
// whatever the math (16-bit operands are widened, and c rounded back on store).
void CpuBackend::matmul(Precision /*math*/, bool trans_a, bool trans_b, float alpha,
                        const Tensor& a_s, const Tensor& b_s, float beta, Tensor& c_s) {
  const MatrixProduct p = product_of(trans_a, trans_b, alpha, a_s, b_s, beta, c_s);
  if (p.m * p.n == 0) return;
  const bool empty = p.k == 0;  // c = beta c
  const OnednnProduct* native =
      all_bf16({&a_s, &b_s, &c_s}) && !empty ? OnednnProduct::find(p, DType::kBF16) : nullptr;
  if (native)
    return native->run(a_s.raw(), b_s.raw(), c_s.raw(), workspace(native->workspace_bytes()));
  F32Views f32(*this);
  const Tensor& a = f32.in(a_s);
  const Tensor& b = f32.in(b_s);
  Tensor& c = beta == 0.f ? f32.out(c_s) : f32.inout(c_s);
  check_f32(a, "matmul a");
  check_f32(b, "matmul b");
  check_f32(c, "matmul c");
  if (empty) {  // no products: sgemm would refuse a leading dimension of 0
    float* cp = c.data<float>();
    for (int64_t i = 0; i < p.m * p.n; ++i) cp[i] = beta == 0.f ? 0.f : beta * cp[i];
    return;
  }
  if (const OnednnProduct* product = OnednnProduct::find(p, DType::kF32)) {
    return product->run(a.raw(), b.raw(), c.raw(), workspace(product->workspace_bytes()));
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, p.m, p.n, p.k, alpha, a.data<float>(), a.dim(1),
              b.data<float>(), b.dim(1), beta, c.data<float>(), p.n);
}

}  // namespace dlb
