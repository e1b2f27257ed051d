// The bias kernels of bias_kernels.h, instantiated for launch (launch.cuh).
#include "runtime/backend/cuda/bias_kernels.h"
#include "runtime/backend/cuda/launch.cuh"

namespace dlb::cuda {

DLB_INSTANTIATE_STORED(BiasAdd)
DLB_INSTANTIATE_STORED(BiasPartialSums)
DLB_INSTANTIATE(BiasLaneSum)
DLB_INSTANTIATE_STORED(BiasChannelSum)

}  // namespace dlb::cuda
