#include "runtime/backend/cuda/library_check.h"

#include <fmt/format.h>

#include "runtime/core/error.h"

namespace dlb::cuda {

void throw_cudnn_error(cudnnStatus_t status, const char* stmt, const char* func, const char* file,
                       int line) {
  const std::string msg =
      fmt::format("cuDNN error {} ({}) in {} at {}:{}: {}", static_cast<int>(status),
                  cudnnGetErrorString(status), func, file, line, stmt);
  if (status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
      status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED) {
    throw OutOfMemory(msg);
  }
  throw Error(ErrorKind::kInvalidArgument, msg);
}

void throw_cublas_error(cublasStatus_t status, const char* stmt, const char* func, const char* file,
                        int line) {
  const std::string msg = fmt::format("cuBLAS error {} in {} at {}:{}: {}",
                                      static_cast<int>(status), func, file, line, stmt);
  if (status == CUBLAS_STATUS_ALLOC_FAILED) throw OutOfMemory(msg);
  throw Error(ErrorKind::kInvalidArgument, msg);
}

}  // namespace dlb::cuda
