// The optimizer kernels of optimizer_kernels.h, instantiated for launch (launch.cuh).
#include "runtime/backend/cuda/launch.cuh"
#include "runtime/backend/cuda/optimizer_kernels.h"

namespace dlb::cuda {

DLB_INSTANTIATE_STORED(SgdUpdate)
DLB_INSTANTIATE_STORED(MultiSgdUpdate)
DLB_INSTANTIATE_STORED(FindNonFinite)
DLB_INSTANTIATE(UpdateLossScale)

}  // namespace dlb::cuda
