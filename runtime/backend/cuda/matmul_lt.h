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

// A cuBLASLt layout as cuBLASLt reports it back.
struct LayoutInfo {
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
};

// The matmul descriptor (f32 scale type; compute 32F, or 32F_FAST_TF32 when TF32 is allowed,
// with the transposes) and the three layouts (cuBLASLt's A, B and C = D), all f32.
class MatmulLayouts {
 public:
  MatmulLayouts(const MatmulShape& s, bool allow_tf32);
  ~MatmulLayouts();
  MatmulLayouts(const MatmulLayouts&) = delete;
  MatmulLayouts& operator=(const MatmulLayouts&) = delete;

  cublasLtMatmulDesc_t desc() const { return desc_; }
  cublasLtMatrixLayout_t lt_a() const { return a_; }  // our b
  cublasLtMatrixLayout_t lt_b() const { return b_; }  // our a
  cublasLtMatrixLayout_t lt_c() const { return c_; }
  LayoutInfo info(cublasLtMatrixLayout_t layout) const;
  cublasComputeType_t compute_type() const;
  bool lt_transposes_a() const;  // cuBLASLt's TRANSA, read back from the descriptor
  bool lt_transposes_b() const;

 private:
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
};

// Layouts plus the algorithm cuBLASLt's heuristic picks within a workspace limit (needs a handle).
class MatmulPlan {
 public:
  MatmulPlan(cublasLtHandle_t handle, const MatmulShape& s, bool allow_tf32,
             size_t workspace_limit);
  size_t workspace_bytes() const { return workspace_; }
  void run(cublasLtHandle_t handle, float alpha, const float* a, const float* b, float beta,
           float* c, void* workspace, cudaStream_t stream) const;

 private:
  MatmulLayouts layouts_;
  cublasLtMatmulAlgo_t algo_{};
  size_t workspace_ = 0;
};

}  // namespace dlb::cuda
