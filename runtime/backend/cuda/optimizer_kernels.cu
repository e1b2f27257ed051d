// The optimizer kernels of optimizer_kernels.h, instantiated for launch (launch.cuh).
#include "runtime/backend/cuda/launch.cuh"
#include "runtime/backend/cuda/optimizer_kernels.h"

// MultiSgdUpdate is its own kernel argument: over the 4 KiB that CUDA allowed before 12.1, within
// the 32,764 bytes that 12.1 and later allow on Volta and later GPUs.
#if CUDART_VERSION < 12010
#error "the multi-tensor SGD kernel's table needs CUDA 12.1 or later (kernel arguments over 4 KiB)"
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
#error \
    "the multi-tensor SGD kernel's table needs a Volta or later GPU (kernel arguments over 4 KiB)"
#endif

namespace dlb::cuda {

static_assert(sizeof(MultiSgdUpdate<float>) <= 32764, "a kernel's arguments take 32,764 bytes");

DLB_INSTANTIATE_STORED(SgdUpdate)
DLB_INSTANTIATE_STORED(MultiSgdUpdate)
DLB_INSTANTIATE_STORED(FindNonFinite)
DLB_INSTANTIATE(UpdateLossScale)

}  // namespace dlb::cuda
