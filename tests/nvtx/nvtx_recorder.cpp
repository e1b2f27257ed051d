// An NVTX injection library (NVTX_INJECTION64_PATH): what an Nsight Systems timeline would show
// of a run's ranges, without Nsight. NVTX3 loads it at the process's first NVTX call and calls
// InitializeInjectionNvtx2, which points the core module's RangePushA and RangePop at the
// recorders below (nvtx3/nvtxDetail/nvtxInit.h describes the protocol). Every push and pop is
// appended to $DLB_NVTX_LOG.<rank> (rank: OMPI_COMM_WORLD_RANK, PMI_RANK or 0), one line each:
//   push <thread> <name>
//   pop <thread>
// where <thread> numbers the process's threads in the order of their first range.
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace {

std::mutex mutex;
FILE* log_file = nullptr;
std::atomic<int> next_thread{0};

int thread_index() {
  thread_local int index = next_thread++;
  return index;
}

void open_log() {
  const char* base = std::getenv("DLB_NVTX_LOG");
  if (!base) return;
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (!rank) rank = std::getenv("PMI_RANK");
  const std::string path = std::string(base) + "." + (rank ? rank : "0");
  log_file = std::fopen(path.c_str(), "w");
}

int NVTX_API push(const char* name) {
  const int t = thread_index();
  std::lock_guard<std::mutex> lock(mutex);
  if (log_file) {
    std::fprintf(log_file, "push %d %s\n", t, name ? name : "");
    std::fflush(log_file);
  }
  return 0;
}

int NVTX_API pop() {
  const int t = thread_index();
  std::lock_guard<std::mutex> lock(mutex);
  if (log_file) {
    std::fprintf(log_file, "pop %d\n", t);
    std::fflush(log_file);
  }
  return 0;
}

}  // namespace

extern "C" NVTX_DYNAMIC_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_table(NVTX_ETID_CALLBACKS));
  NvtxFunctionTable core = nullptr;
  unsigned int size = 0;
  if (!callbacks || !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &size)) return 0;
  if (size <= NVTX_CBID_CORE_RangePop) return 0;
  *core[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(&push);
  *core[NVTX_CBID_CORE_RangePop] = reinterpret_cast<NvtxFunctionPointer>(&pop);
  open_log();
  return 1;
}
