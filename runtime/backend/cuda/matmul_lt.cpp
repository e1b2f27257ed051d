#include "runtime/backend/cuda/matmul_lt.h"

#include <fmt/format.h>

#include "runtime/backend/cuda/library_check.h"
#include "runtime/core/error.h"
#include "runtime/memory/allocator.h"

namespace dlb::cuda {

MatmulShape matmul_shape(bool trans_a, bool trans_b, const Shape& a, const Shape& b,
                         const Shape& c) {
  if (a.rank() != 2 || b.rank() != 2 || c.rank() != 2) {
    throw InvalidArgument(
        fmt::format("matmul takes 2-D tensors (got {}, {}, {})", a.str(), b.str(), c.str()));
  }
  MatmulShape s{trans_a, trans_b, trans_a ? a[1] : a[0], trans_b ? b[0] : b[1],
                trans_a ? a[0] : a[1]};
  const int64_t kb = trans_b ? b[1] : b[0];
  if (kb != s.k || c[0] != s.m || c[1] != s.n) {
    throw InvalidArgument(fmt::format("matmul shapes disagree: op(a) of {}{}, op(b) of {}{}, c {}",
                                      a.str(), trans_a ? "^T" : "", b.str(), trans_b ? "^T" : "",
                                      c.str()));
  }
  return s;
}

namespace {
// A column-major layout of the matrix stored row-major as [rows_rm, cols_rm]: cuBLASLt sees
// [cols_rm, rows_rm] with leading dimension cols_rm.
cublasLtMatrixLayout_t row_major_layout(int64_t rows_rm, int64_t cols_rm) {
  cublasLtMatrixLayout_t l = nullptr;
  DLB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, static_cast<uint64_t>(cols_rm),
                                              static_cast<uint64_t>(rows_rm), cols_rm));
  return l;
}
}  // namespace

MatmulLayouts::MatmulLayouts(const MatmulShape& s, bool allow_tf32) {
  const cublasComputeType_t compute =
      allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  DLB_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, compute, CUDA_R_32F));
  // cuBLASLt's A is our b, its B our a: same transposes.
  const cublasOperation_t ta = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  DLB_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  DLB_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  // Our b is stored [k, n], or [n, k] when transposed; our a [m, k], or [k, m]; c [m, n].
  a_ = s.trans_b ? row_major_layout(s.n, s.k) : row_major_layout(s.k, s.n);
  b_ = s.trans_a ? row_major_layout(s.k, s.m) : row_major_layout(s.m, s.k);
  c_ = row_major_layout(s.m, s.n);
}

MatmulLayouts::~MatmulLayouts() {
  for (auto l : {a_, b_, c_}) {
    if (l) cublasLtMatrixLayoutDestroy(l);
  }
  if (desc_) cublasLtMatmulDescDestroy(desc_);
}

LayoutInfo MatmulLayouts::info(cublasLtMatrixLayout_t l) const {
  LayoutInfo i;
  size_t written = 0;
  DLB_CUBLAS_CHECK(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &i.rows,
                                                    sizeof(i.rows), &written));
  DLB_CUBLAS_CHECK(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_COLS, &i.cols,
                                                    sizeof(i.cols), &written));
  DLB_CUBLAS_CHECK(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_LD, &i.ld,
                                                    sizeof(i.ld), &written));
  return i;
}

cublasComputeType_t MatmulLayouts::compute_type() const {
  cublasComputeType_t t{};
  size_t written = 0;
  DLB_CUBLAS_CHECK(cublasLtMatmulDescGetAttribute(desc_, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &t,
                                                  sizeof(t), &written));
  return t;
}

namespace {
bool transposes(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t which) {
  cublasOperation_t op{};
  size_t written = 0;
  DLB_CUBLAS_CHECK(cublasLtMatmulDescGetAttribute(d, which, &op, sizeof(op), &written));
  return op == CUBLAS_OP_T;
}
}  // namespace

bool MatmulLayouts::lt_transposes_a() const {
  return transposes(desc_, CUBLASLT_MATMUL_DESC_TRANSA);
}
bool MatmulLayouts::lt_transposes_b() const {
  return transposes(desc_, CUBLASLT_MATMUL_DESC_TRANSB);
}

MatmulPlan::MatmulPlan(cublasLtHandle_t handle, const MatmulShape& s, bool allow_tf32,
                       size_t workspace_limit)
    : layouts_(s, allow_tf32) {
  cublasLtMatmulPreference_t pref = nullptr;
  DLB_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t limit = workspace_limit;
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t set = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit, sizeof(limit));
  const cublasStatus_t heur = set == CUBLAS_STATUS_SUCCESS
                                  ? cublasLtMatmulAlgoGetHeuristic(
                                        handle, layouts_.desc(), layouts_.lt_a(), layouts_.lt_b(),
                                        layouts_.lt_c(), layouts_.lt_c(), pref, 1, &result, &found)
                                  : set;
  cublasLtMatmulPreferenceDestroy(pref);
  DLB_CUBLAS_CHECK(heur);
  if (found == 0) {
    throw InvalidArgument(
        fmt::format("matmul [{}x{}]x[{}x{}]: cuBLASLt has no algorithm within {} of workspace", s.m,
                    s.k, s.k, s.n, format_bytes(workspace_limit)));
  }
  algo_ = result.algo;
  workspace_ = result.workspaceSize;
}

void MatmulPlan::run(cublasLtHandle_t handle, float alpha, const float* a, const float* b,
                     float beta, float* c, void* workspace, cudaStream_t stream) const {
  // alpha and beta are host floats (the default pointer mode, scale type f32).
  DLB_CUBLAS_CHECK(cublasLtMatmul(handle, layouts_.desc(), &alpha, b, layouts_.lt_a(), a,
                                  layouts_.lt_b(), &beta, c, layouts_.lt_c(), c, layouts_.lt_c(),
                                  &algo_, workspace, workspace_, stream));
}

}  // namespace dlb::cuda
