// NVTX ranges, when the build has the NVTX3 headers (from the CUDA toolkit); no-ops otherwise.
#pragma once

namespace dlb {

void nvtx_push(const char* name);
void nvtx_pop();
bool nvtx_compiled();

}  // namespace dlb
