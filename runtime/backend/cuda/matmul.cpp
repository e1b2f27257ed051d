// Matrix products by cuBLASLt (matmul_lt.h), one plan per shape and type.
#include <fmt/format.h>

#include <algorithm>

#include "runtime/backend/cuda/cuda_backend_impl.h"

namespace dlb::cuda {
namespace {

// cuBLASLt's workspace for matrix products: NVIDIA recommends 32 MiB on Hopper. A smaller
// --workspace-limit lowers it.
constexpr size_t kMatmulWorkspace = size_t{32} << 20;

}  // namespace

void CudaBackend::matmul(Precision math, bool trans_a, bool trans_b, float alpha, const Tensor& a,
                         const Tensor& b, float beta, Tensor& c) {
  const DType dtype = a.dtype();
  for (const Tensor* t : std::initializer_list<const Tensor*>{&b, &c})
    check_dtype(*t, dtype, "matmul operand");
  const MatmulShape s = matmul_shape(trans_a, trans_b, a.shape(), b.shape(), c.shape());
  const MatmulTypes types = matmul_types(dtype, math);
  auto key = std::make_tuple(s.trans_a, s.trans_b, s.m, s.n, s.k, dtype, types.compute);
  auto it = matmuls_.find(key);
  if (it == matmuls_.end()) {
    const size_t limit =
        std::min(kMatmulWorkspace, options_.workspace_limit.value_or(kMatmulWorkspace));
    it = matmuls_
             .emplace(key, std::make_unique<MatmulPlan>(
                               lt_, s, types, limit,
                               // the user's limit, unless above our own cap
                               options_.workspace_limit &&
                                   *options_.workspace_limit <= kMatmulWorkspace))
             .first;
  }
  const MatmulPlan& plan = *it->second;
  NvtxRange range("cublasLt matmul");
  plan.run(lt_, alpha, a.raw(), b.raw(), beta, c.raw(), workspace(plan.workspace_bytes()),
           stream_->get());
}

}  // namespace dlb::cuda
