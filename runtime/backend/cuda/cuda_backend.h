// The CUDA backend: every op of the Backend seam on one GPU, in f32 with strict fp32 or TF32
// math. Convolution and batch norm run cuDNN graphs (cudnn_graphs.h), matrix products cuBLASLt
// (matmul_lt.h), and everything else our own kernels (*_kernels.h). All work is queued on one
// compute stream. In the training step nothing here waits for the device, except a copy to
// pageable host memory and an input copy whose staging buffer is still in flight; making a plan
// (autotuning) and growing the workspace do synchronize, and happen before the timed steps.
#pragma once
#include <memory>

#include "runtime/backend/backend.h"

namespace dlb::cuda {

// `options.device` is taken modulo the visible devices. Throws InvalidArgument when none is
// visible (asking for the CUDA backend on a machine without a GPU is a bad request).
std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& options);

}  // namespace dlb::cuda
