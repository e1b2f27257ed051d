// Status checks for cuDNN and cuBLASLt calls, like cuda_check.h's for the runtime: the statement,
// function, file and line go into the thrown error. An allocation failure inside either library
// is OutOfMemory (the harness records it as `oom`); anything else is a library error.
#pragma once
#include <cublasLt.h>
#include <cudnn.h>

#include <string>

namespace dlb::cuda {

// The error for a cuDNN status: allocation failures are OutOfMemory, bad parameters
// InvalidArgument, unsupported configurations Unsupported, the rest DeviceError.
[[noreturn]] void throw_for_cudnn_status(cudnnStatus_t status, const std::string& message);
[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* stmt, const char* func,
                                    const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* stmt, const char* func,
                                     const char* file, int line);

}  // namespace dlb::cuda

#define DLB_CUDNN_CHECK(stmt)                                                           \
  do {                                                                                  \
    cudnnStatus_t dlb_status_ = (stmt);                                                 \
    if (dlb_status_ != CUDNN_STATUS_SUCCESS)                                            \
      ::dlb::cuda::throw_cudnn_error(dlb_status_, #stmt, __func__, __FILE__, __LINE__); \
  } while (0)

#define DLB_CUBLAS_CHECK(stmt)                                                           \
  do {                                                                                   \
    cublasStatus_t dlb_status_ = (stmt);                                                 \
    if (dlb_status_ != CUBLAS_STATUS_SUCCESS)                                            \
      ::dlb::cuda::throw_cublas_error(dlb_status_, #stmt, __func__, __FILE__, __LINE__); \
  } while (0)
