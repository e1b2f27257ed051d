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

MatmulTypes matmul_types(DType data, Precision math) {
  switch (data) {
    case DType::kF32:
      return {CUDA_R_32F,
              math == Precision::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
    case DType::kF16:
    case DType::kBF16:
      if (math == Precision::kTf32) {
        throw Unsupported(fmt::format("matmul: tf32 math on {} data", dtype_name(data)));
      }
      return {data == DType::kF16 ? CUDA_R_16F : CUDA_R_16BF, CUBLAS_COMPUTE_32F};
    default:
      throw Unsupported(fmt::format("matmul: {} tensors hold no floats", dtype_name(data)));
  }
}

namespace {
// A column-major layout of the matrix stored row-major as [rows_rm, cols_rm]: cuBLASLt sees
// [cols_rm, rows_rm] with leading dimension cols_rm.
cublasLtMatrixLayout_t row_major_layout(cudaDataType_t type, int64_t rows_rm, int64_t cols_rm) {
  cublasLtMatrixLayout_t l = nullptr;
  DLB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, type, static_cast<uint64_t>(cols_rm),
                                              static_cast<uint64_t>(rows_rm), cols_rm));
  return l;
}
}  // namespace

MatmulLayouts::MatmulLayouts(const MatmulShape& s, const MatmulTypes& types) {
  DLB_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, types.compute, CUDA_R_32F));
  // cuBLASLt's A is our b, its B our a: same transposes.
  const cublasOperation_t ta = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  DLB_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  DLB_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  // Our b is stored [k, n], or [n, k] when transposed; our a [m, k], or [k, m]; c [m, n].
  const cudaDataType_t t = types.data;
  a_ = s.trans_b ? row_major_layout(t, s.n, s.k) : row_major_layout(t, s.k, s.n);
  b_ = s.trans_a ? row_major_layout(t, s.k, s.m) : row_major_layout(t, s.m, s.k);
  c_ = row_major_layout(t, s.m, s.n);
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

cudaDataType_t MatmulLayouts::data_type(cublasLtMatrixLayout_t l) const {
  uint32_t t = 0;  // CUBLASLT_MATRIX_LAYOUT_TYPE is a uint32_t holding a cudaDataType
  size_t written = 0;
  DLB_CUBLAS_CHECK(
      cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_TYPE, &t, sizeof(t), &written));
  return static_cast<cudaDataType_t>(t);
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

cublasLtMatmulPreference_t matmul_preference(size_t workspace_limit) {
  cublasLtMatmulPreference_t pref = nullptr;
  DLB_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t limit = workspace_limit;
  const uint32_t schemes = kReductionSchemes;
  cublasStatus_t set = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit, sizeof(limit));
  if (set == CUBLAS_STATUS_SUCCESS) {
    set = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                               &schemes, sizeof(schemes));
  }
  if (set != CUBLAS_STATUS_SUCCESS) cublasLtMatmulPreferenceDestroy(pref);
  DLB_CUBLAS_CHECK(set);
  return pref;
}

void check_matmul_heuristic(cublasStatus_t status, int found, const MatmulShape& s,
                            size_t workspace_limit, bool limit_is_users) {
  if (status == CUBLAS_STATUS_SUCCESS && found > 0) return;
  if (status != CUBLAS_STATUS_SUCCESS && status != CUBLAS_STATUS_NOT_SUPPORTED) {
    DLB_CUBLAS_CHECK(status);
  }
  const std::string msg =
      fmt::format("matmul [{}x{}]x[{}x{}]: cuBLASLt has no algorithm within {} of workspace", s.m,
                  s.k, s.k, s.n, format_bytes(workspace_limit));
  if (limit_is_users) throw InvalidArgument(msg);
  throw Unsupported(msg);
}

MatmulPlan::MatmulPlan(cublasLtHandle_t handle, const MatmulShape& s, const MatmulTypes& types,
                       size_t workspace_limit, bool limit_is_users)
    : layouts_(s, types) {
  cublasLtMatmulPreference_t pref = matmul_preference(workspace_limit);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t heur =
      cublasLtMatmulAlgoGetHeuristic(handle, layouts_.desc(), layouts_.lt_a(), layouts_.lt_b(),
                                     layouts_.lt_c(), layouts_.lt_c(), pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  check_matmul_heuristic(heur, found, s, workspace_limit, limit_is_users);
  algo_ = result.algo;
  workspace_ = result.workspaceSize;
}

void MatmulPlan::run(cublasLtHandle_t handle, float alpha, const void* a, const void* b, float beta,
                     void* c, void* workspace, cudaStream_t stream) const {
  // alpha and beta are host floats (the default pointer mode, scale type f32).
  DLB_CUBLAS_CHECK(cublasLtMatmul(handle, layouts_.desc(), &alpha, b, layouts_.lt_a(), a,
                                  layouts_.lt_b(), &beta, c, layouts_.lt_c(), c, layouts_.lt_c(),
                                  &algo_, workspace, workspace_, stream));
}

}  // namespace dlb::cuda
