#include "runtime/backend/cuda/library_check.h"

#include <fmt/format.h>

#include "runtime/core/error.h"

namespace dlb::cuda {

void throw_for_cudnn_status(cudnnStatus_t status, const std::string& msg) {
  // By category (cudnn_graph.h: 1xxx not initialized, 2xxx bad parameter, 3xxx not supported,
  // 4xxx internal, 5xxx execution failed), allocation failures first.
  if (status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
      status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED) {
    throw OutOfMemory(msg);
  }
  switch (CUDNN_STATUS_CATEGORY(status)) {
    case CUDNN_STATUS_BAD_PARAM:
      throw InvalidArgument(msg);
    case CUDNN_STATUS_NOT_SUPPORTED:
      throw Unsupported(msg);
    default:
      throw DeviceError(msg);
  }
}

void throw_cudnn_error(cudnnStatus_t status, const char* stmt, const char* func, const char* file,
                       int line) {
  const std::string msg =
      fmt::format("cuDNN error {} ({}) in {} at {}:{}: {}", static_cast<int>(status),
                  cudnnGetErrorString(status), func, file, line, stmt);
  throw_for_cudnn_status(status, msg);
}

void throw_cublas_error(cublasStatus_t status, const char* stmt, const char* func, const char* file,
                        int line) {
  const std::string msg = fmt::format("cuBLAS error {} in {} at {}:{}: {}",
                                      static_cast<int>(status), func, file, line, stmt);
  switch (status) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      throw OutOfMemory(msg);
    case CUBLAS_STATUS_INVALID_VALUE:
      throw InvalidArgument(msg);
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
      throw Unsupported(msg);
    default:  // execution failures, internal errors, a missing handle
      throw DeviceError(msg);
  }
}

}  // namespace dlb::cuda
