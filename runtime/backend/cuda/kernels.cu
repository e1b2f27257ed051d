// The CUDA backend's own kernels: each is a grid-stride loop over one functor of kernels.h, whose
// body tests/unit/cuda_kernel_math_test.cpp checks on the host over every index.
#include <cuda_runtime.h>

#include "runtime/backend/cuda/cuda_check.h"
#include "runtime/backend/cuda/kernels.h"
#include "runtime/backend/cuda/launch.h"

namespace dlb::cuda {
namespace {

template <typename F>
__global__ void for_each_index(int64_t n, F f) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    f(i);
  }
}

}  // namespace

template <typename F>
void launch_for_each(StreamRef stream, int64_t n, const F& f) {
  const Grid g = grid_for(n);
  if (g.blocks == 0) return;
  for_each_index<<<static_cast<unsigned>(g.blocks), g.threads, 0,
                   static_cast<cudaStream_t>(stream.native)>>>(n, f);
  DLB_CUDA_CHECK(cudaGetLastError());
}

#define DLB_INSTANTIATE(...) \
  template void launch_for_each<__VA_ARGS__>(StreamRef, int64_t, const __VA_ARGS__&);
// A functor over each storage type: f32, and fp16 and bf16 storage.
#define DLB_INSTANTIATE_STORED(K) \
  DLB_INSTANTIATE(K<float>)       \
  DLB_INSTANTIATE(K<F16>)         \
  DLB_INSTANTIATE(K<BF16>)
#define DLB_INSTANTIATE_CAST_FROM(S) \
  DLB_INSTANTIATE(Cast<S, float>)    \
  DLB_INSTANTIATE(Cast<S, F16>)      \
  DLB_INSTANTIATE(Cast<S, BF16>)

DLB_INSTANTIATE_STORED(Fill)
DLB_INSTANTIATE_CAST_FROM(float)
DLB_INSTANTIATE_CAST_FROM(F16)
DLB_INSTANTIATE_CAST_FROM(BF16)
DLB_INSTANTIATE_STORED(ReluForward)
DLB_INSTANTIATE_STORED(ReluBackward)
DLB_INSTANTIATE_STORED(Add)
DLB_INSTANTIATE_STORED(Accumulate)
DLB_INSTANTIATE_STORED(DropoutForward)
DLB_INSTANTIATE_STORED(DropoutBackward)
DLB_INSTANTIATE(Increment)
DLB_INSTANTIATE_STORED(SgdUpdate)
DLB_INSTANTIATE_STORED(FindNonFinite)
DLB_INSTANTIATE(UpdateLossScale)
DLB_INSTANTIATE_STORED(SoftmaxCrossEntropyRow)
DLB_INSTANTIATE(MeanOfRows)
DLB_INSTANTIATE_STORED(SoftmaxCrossEntropyBackward)
DLB_INSTANTIATE_STORED(AdaptiveAvgPoolForward)
DLB_INSTANTIATE_STORED(AdaptiveAvgPoolBackward)
DLB_INSTANTIATE_STORED(PoolForward)
DLB_INSTANTIATE_STORED(PoolBackward)
DLB_INSTANTIATE_STORED(BiasAdd)
DLB_INSTANTIATE_STORED(BiasPartialSums)
DLB_INSTANTIATE(BiasLaneSum)
DLB_INSTANTIATE_STORED(BiasChannelSum)
DLB_INSTANTIATE(BatchNormRunningUpdate)
DLB_INSTANTIATE_STORED(BatchNormInfer)
DLB_INSTANTIATE_STORED(BatchNormRowSum)
DLB_INSTANTIATE(BatchNormMean)
DLB_INSTANTIATE_STORED(BatchNormRowSquares)
DLB_INSTANTIATE(BatchNormStatistics)
DLB_INSTANTIATE_STORED(BatchNormNormalize)
DLB_INSTANTIATE_STORED(BatchNormBackwardRowSums)
DLB_INSTANTIATE_STORED(BatchNormBackwardChannel)
DLB_INSTANTIATE_STORED(BatchNormBackwardData)

}  // namespace dlb::cuda
