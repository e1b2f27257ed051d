// NVTX ranges, when the build has the NVTX3 headers (from the CUDA toolkit); no-ops otherwise.
#pragma once

namespace dlb {

void nvtx_push(const char* name);
void nvtx_pop();
bool nvtx_compiled();

// A range for a scope: the CUDA backend names its library calls and kernel groups with these,
// inside the tracer's ranges for layers, buckets and the optimizer.
class NvtxRange {
 public:
  explicit NvtxRange(const char* name) { nvtx_push(name); }
  ~NvtxRange() { nvtx_pop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace dlb
