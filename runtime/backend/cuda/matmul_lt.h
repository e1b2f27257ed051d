// Row-major matrix products on cuBLASLt. cuBLASLt is column-major; a row-major [r, c] matrix is
// a column-major [c, r] one, so c = op(a) op(b) (row-major) is computed as
// c^T = op(b)^T op(a)^T (column-major): cuBLASLt's A is our b and its B is our a, with the same
// transposes, and m and n swap. The descriptors and layouts need no handle (tests check them on
// every linear layer of every model); the algorithm choice and the product need one.
#pragma once
#include <cublasLt.h>

#include <cstdint>
#include <optional>
#include <string>

#include "runtime/core/dtype.h"
#include "runtime/core/shape.h"

namespace dlb::cuda {

// c[m, n] = alpha * op(a) * op(b) + beta * c, row-major; op(a) is [m, k] and op(b) is [k, n].
struct MatmulShape {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  bool operator==(const MatmulShape& o) const {
    return trans_a == o.trans_a && trans_b == o.trans_b && m == o.m && n == o.n && k == o.k;
  }
};
// Checks that the 2-D shapes agree; throws InvalidArgument naming them when not.
MatmulShape matmul_shape(bool trans_a, bool trans_b, const Shape& a, const Shape& b,
                         const Shape& c);

// The storage of the three matrices and the compute type: f32 with strict FMA math
// (CUBLAS_COMPUTE_32F) or TF32 (CUBLAS_COMPUTE_32F_FAST_TF32, precision tf32); fp16 and bf16
// (CUDA_R_16F, CUDA_R_16BF) accumulate in f32 on tensor cores (CUBLAS_COMPUTE_32F), as PyTorch's
// cuBLASLt calls do. The scale type (alpha, beta) is f32 in every case.
struct MatmulTypes {
  cudaDataType_t data = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
};
// Throws Unsupported for a type that holds no floats, or TF32 math on 16-bit data.
MatmulTypes matmul_types(DType data, Precision math);

// A cuBLASLt layout as cuBLASLt reports it back.
struct LayoutInfo {
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
};

// The matmul descriptor (f32 scale type, the compute type and the transposes) and the three
// layouts (cuBLASLt's A, B and C = D), all of one storage type.
class MatmulLayouts {
 public:
  MatmulLayouts(const MatmulShape& s, const MatmulTypes& types);
  ~MatmulLayouts();
  MatmulLayouts(const MatmulLayouts&) = delete;
  MatmulLayouts& operator=(const MatmulLayouts&) = delete;

  cublasLtMatmulDesc_t desc() const { return desc_; }
  cublasLtMatrixLayout_t lt_a() const { return a_; }  // our b
  cublasLtMatrixLayout_t lt_b() const { return b_; }  // our a
  cublasLtMatrixLayout_t lt_c() const { return c_; }
  LayoutInfo info(cublasLtMatrixLayout_t layout) const;
  cublasComputeType_t compute_type() const;
  cudaDataType_t data_type(cublasLtMatrixLayout_t layout) const;  // as cuBLASLt reports it
  bool lt_transposes_a() const;  // cuBLASLt's TRANSA, read back from the descriptor
  bool lt_transposes_b() const;

 private:
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
};

// What the heuristic may choose: algorithms within `workspace_limit`, and of split-K reductions
// only those that sum the partial products in the compute type (f32), never in the output's type
// (in 16-bit runs that would round every partial sum to 16 bits; in-place reduction adds into the
// output with atomics, in its type and in no fixed order). PyTorch sets the same mask when
// reduced-precision reductions are disallowed. The op checker's bounds (docs/check-ops.md) assume
// f32 accumulation. A preference needs no handle; the caller destroys it.
cublasLtMatmulPreference_t matmul_preference(size_t workspace_limit);
inline constexpr uint32_t kReductionSchemes =
    CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;

// What cublasLtMatmulAlgoGetHeuristic's answer means: `found` algorithms with `status`. No
// algorithm, whether the heuristic says NOT_SUPPORTED or finds none, is one answer: within a
// limit the user set (`limit_is_users`) InvalidArgument (the request's fault, exit 2), else
// Unsupported; any other failed status is cuBLAS's error. Returns when there is an algorithm.
void check_matmul_heuristic(cublasStatus_t status, int found, const MatmulShape& s,
                            size_t workspace_limit, bool limit_is_users);

// Layouts plus the algorithm cuBLASLt's heuristic picks within a workspace limit (needs a handle).
class MatmulPlan {
 public:
  // `limit_is_users`: the workspace limit is --workspace-limit's (see check_matmul_heuristic).
  MatmulPlan(cublasLtHandle_t handle, const MatmulShape& s, const MatmulTypes& types,
             size_t workspace_limit, bool limit_is_users);
  size_t workspace_bytes() const { return workspace_; }
  void run(cublasLtHandle_t handle, float alpha, const void* a, const void* b, float beta, void* c,
           void* workspace, cudaStream_t stream) const;

 private:
  MatmulLayouts layouts_;
  cublasLtMatmulAlgo_t algo_{};
  size_t workspace_ = 0;
};

}  // namespace dlb::cuda
