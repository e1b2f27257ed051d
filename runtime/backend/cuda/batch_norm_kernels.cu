// The batch norm kernels of batch_norm_kernels.h, instantiated for launch (launch.cuh).
#include "runtime/backend/cuda/batch_norm_kernels.h"
#include "runtime/backend/cuda/launch.cuh"

namespace dlb::cuda {

DLB_INSTANTIATE(BatchNormRunningUpdate)
DLB_INSTANTIATE_STORED(BatchNormInfer)
DLB_INSTANTIATE(BatchNormStatistics)
DLB_INSTANTIATE_STORED(BatchNormNormalize)
DLB_INSTANTIATE_STORED(BatchNormBackwardChannel)
DLB_INSTANTIATE_STORED(BatchNormBackwardData)
DLB_INSTANTIATE_REDUCE_STORED(BatchNormMoments)
DLB_INSTANTIATE_REDUCE_STORED(BatchNormBackwardSums)

}  // namespace dlb::cuda
