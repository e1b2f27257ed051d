// GPU test programs run where a GPU is visible and exit 77 elsewhere, which ctest reports as
// skipped (SKIP_RETURN_CODE in tests/CMakeLists.txt).
#pragma once
#include <cstdio>

#include "runtime/backend/backend.h"

namespace dlb {

constexpr int kSkippedExitCode = 77;

// True, after saying so, when no GPU is visible.
inline bool skip_without_gpu() {
  if (gpu_available()) return false;
  std::puts("no CUDA device is visible: skipped");
  return true;
}

}  // namespace dlb
