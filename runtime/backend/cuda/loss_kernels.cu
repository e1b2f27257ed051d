// The loss kernels of loss_kernels.h, instantiated for launch (launch.cuh).
#include "runtime/backend/cuda/launch.cuh"
#include "runtime/backend/cuda/loss_kernels.h"

namespace dlb::cuda {

DLB_INSTANTIATE_STORED(SoftmaxCrossEntropyRow)
DLB_INSTANTIATE(MeanOfRows)
DLB_INSTANTIATE_STORED(SoftmaxCrossEntropyBackward)

}  // namespace dlb::cuda
