// The image kernels of image_kernels.h, instantiated for launch (launch.cuh).
#include "runtime/backend/cuda/image_kernels.h"
#include "runtime/backend/cuda/launch.cuh"

namespace dlb::cuda {

DLB_INSTANTIATE(ResizeRows)
DLB_INSTANTIATE_STORED(ResizeColumnsNormalize)

}  // namespace dlb::cuda
