// The one file that knows whether NVTX is compiled in.
#include "runtime/core/nvtx.h"

#if DLB_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace dlb {

#if DLB_HAVE_NVTX
void nvtx_push(const char* name) { nvtxRangePushA(name); }
void nvtx_pop() { nvtxRangePop(); }
bool nvtx_compiled() { return true; }
#else
void nvtx_push(const char*) {}
void nvtx_pop() {}
bool nvtx_compiled() { return false; }
#endif

}  // namespace dlb
