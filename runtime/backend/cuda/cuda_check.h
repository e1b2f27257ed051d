// One check macro family for CUDA runtime calls: the statement, function, file and line go into
// the thrown error. Library code throws; only main() exits.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "runtime/core/error.h"

namespace dlb::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* stmt, const char* func,
                                   const char* file, int line);
// cudaErrorNoDevice and cudaErrorInsufficientDriver (no driver at all) both mean "no GPU here".
bool is_no_gpu_error(cudaError_t err);

}  // namespace dlb::cuda

#define DLB_CUDA_CHECK(stmt)                                                        \
  do {                                                                              \
    cudaError_t dlb_err_ = (stmt);                                                  \
    if (dlb_err_ != cudaSuccess)                                                    \
      ::dlb::cuda::throw_cuda_error(dlb_err_, #stmt, __func__, __FILE__, __LINE__); \
  } while (0)
