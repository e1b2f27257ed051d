// Row-major matrix multiply: bf16 matrices natively through oneDNN where this CPU multiplies bf16
// (matmul_onednn.h), everything else through OpenBLAS sgemm in f32.
#include <cblas.h>
#include <fmt/format.h>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/f32_views.h"
#include "runtime/backend/cpu/matmul_onednn.h"
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
Bf16Product product_of(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b,
                       float beta, const Tensor& c) {
  for (const Tensor* t : {&a, &b, &c}) {
    if (!t->defined()) throw InvalidArgument("matmul: tensor is not allocated");
  }
  if (a.shape().rank() != 2 || b.shape().rank() != 2 || c.shape().rank() != 2) {
    throw InvalidArgument("matmul takes 2-D tensors");
  }
  Bf16Product p{trans_a,
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

ProductArithmetic CpuBackend::matmul_arithmetic(const OpTypes& t) const {
  if (t.data == DType::kBF16 && t.params == DType::kBF16 && onednn_multiplies_bf16()) {
    return {DType::kBF16, true};
  }
  return {};
}

// bf16 operands natively where oneDNN multiplies them (rounded once on store); any other in f32
// whatever the math (16-bit operands are widened, and c rounded back on store).
void CpuBackend::matmul(Precision /*math*/, bool trans_a, bool trans_b, float alpha,
                        const Tensor& a_s, const Tensor& b_s, float beta, Tensor& c_s) {
  const Bf16Product p = product_of(trans_a, trans_b, alpha, a_s, b_s, beta, c_s);
  if (all_bf16({&a_s, &b_s, &c_s}) && onednn_multiplies_bf16() && p.m * p.n * p.k > 0) {
    return onednn_matmul_bf16(p, a_s.raw(), b_s.raw(), c_s.raw());
  }
  F32Views f32(*this);
  const Tensor& a = f32.in(a_s);
  const Tensor& b = f32.in(b_s);
  Tensor& c = beta == 0.f ? f32.out(c_s) : f32.inout(c_s);
  check_f32(a, "matmul a");
  check_f32(b, "matmul b");
  check_f32(c, "matmul c");
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, p.m, p.n, p.k, alpha, a.data<float>(), a.dim(1),
              b.data<float>(), b.dim(1), beta, c.data<float>(), p.n);
}

}  // namespace dlb
