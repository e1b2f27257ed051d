// The elementwise kernels of elementwise_kernels.h, instantiated for launch (launch.cuh).
#include "runtime/backend/cuda/elementwise_kernels.h"
#include "runtime/backend/cuda/launch.cuh"

namespace dlb::cuda {

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

}  // namespace dlb::cuda
