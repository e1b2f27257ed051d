// The loss kernels of loss_kernels.h, instantiated for launch (launch.cuh).
#include "runtime/backend/cuda/launch.cuh"
#include "runtime/backend/cuda/loss_kernels.h"

namespace dlb::cuda {

DLB_INSTANTIATE_REDUCE_STORED(SoftmaxRowMax)
DLB_INSTANTIATE_REDUCE_STORED(SoftmaxRowSum)
DLB_INSTANTIATE_STORED(SoftmaxProbabilities)
DLB_INSTANTIATE_REDUCE(LossTermsSum)
DLB_INSTANTIATE(LossMean)
DLB_INSTANTIATE_STORED(SoftmaxCrossEntropyBackward)

}  // namespace dlb::cuda
