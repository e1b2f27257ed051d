// The pooling kernels of pooling_kernels.h, instantiated for launch (launch.cuh).
#include "runtime/backend/cuda/launch.cuh"
#include "runtime/backend/cuda/pooling_kernels.h"

namespace dlb::cuda {

DLB_INSTANTIATE_STORED(AdaptiveAvgPoolForward)
DLB_INSTANTIATE_STORED(AdaptiveAvgPoolBackward)
DLB_INSTANTIATE_STORED(PoolForward)
DLB_INSTANTIATE_STORED(PoolBackward)
DLB_INSTANTIATE_STORED(MaxPoolForwardArgmax)
DLB_INSTANTIATE_STORED(MaxPoolBackwardArgmax)

}  // namespace dlb::cuda
