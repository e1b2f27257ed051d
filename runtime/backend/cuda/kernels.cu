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

template void launch_for_each<Fill>(StreamRef, int64_t, const Fill&);
template void launch_for_each<ReluForward>(StreamRef, int64_t, const ReluForward&);
template void launch_for_each<ReluBackward>(StreamRef, int64_t, const ReluBackward&);
template void launch_for_each<Add>(StreamRef, int64_t, const Add&);
template void launch_for_each<Accumulate>(StreamRef, int64_t, const Accumulate&);
template void launch_for_each<DropoutForward>(StreamRef, int64_t, const DropoutForward&);
template void launch_for_each<DropoutBackward>(StreamRef, int64_t, const DropoutBackward&);
template void launch_for_each<SgdUpdate>(StreamRef, int64_t, const SgdUpdate&);
template void launch_for_each<SoftmaxCrossEntropyRow>(StreamRef, int64_t,
                                                      const SoftmaxCrossEntropyRow&);
template void launch_for_each<MeanOfRows>(StreamRef, int64_t, const MeanOfRows&);
template void launch_for_each<SoftmaxCrossEntropyBackward>(StreamRef, int64_t,
                                                           const SoftmaxCrossEntropyBackward&);
template void launch_for_each<AdaptiveAvgPoolForward>(StreamRef, int64_t,
                                                      const AdaptiveAvgPoolForward&);
template void launch_for_each<AdaptiveAvgPoolBackward>(StreamRef, int64_t,
                                                       const AdaptiveAvgPoolBackward&);
template void launch_for_each<PoolForward>(StreamRef, int64_t, const PoolForward&);
template void launch_for_each<PoolBackward>(StreamRef, int64_t, const PoolBackward&);
template void launch_for_each<BiasAdd>(StreamRef, int64_t, const BiasAdd&);
template void launch_for_each<BiasRowSum>(StreamRef, int64_t, const BiasRowSum&);
template void launch_for_each<BiasChannelSum>(StreamRef, int64_t, const BiasChannelSum&);
template void launch_for_each<BatchNormRunningUpdate>(StreamRef, int64_t,
                                                      const BatchNormRunningUpdate&);
template void launch_for_each<BatchNormInfer>(StreamRef, int64_t, const BatchNormInfer&);

template void launch_for_each<BatchNormRowSum>(StreamRef, int64_t, const BatchNormRowSum&);
template void launch_for_each<BatchNormMean>(StreamRef, int64_t, const BatchNormMean&);
template void launch_for_each<BatchNormRowSquares>(StreamRef, int64_t, const BatchNormRowSquares&);
template void launch_for_each<BatchNormStatistics>(StreamRef, int64_t, const BatchNormStatistics&);
template void launch_for_each<BatchNormNormalize>(StreamRef, int64_t, const BatchNormNormalize&);
template void launch_for_each<BatchNormBackwardRowSums>(StreamRef, int64_t,
                                                        const BatchNormBackwardRowSums&);
template void launch_for_each<BatchNormBackwardChannel>(StreamRef, int64_t,
                                                        const BatchNormBackwardChannel&);
template void launch_for_each<BatchNormBackwardData>(StreamRef, int64_t,
                                                     const BatchNormBackwardData&);

}  // namespace dlb::cuda
