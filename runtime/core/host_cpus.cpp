#include "runtime/core/host_cpus.h"

#include <sched.h>

#include <algorithm>
#include <thread>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace dlb {

int64_t usable_cpus() {
#ifdef _OPENMP
  // OpenMP's count: this thread's mask, or, where OMP_PROC_BIND or OMP_PLACES has bound this
  // thread to one place since the process started, every place's CPUs (the mask it started with).
  return std::max(omp_get_num_procs(), 1);
#else
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0 && CPU_COUNT(&mask) > 0) {
    return CPU_COUNT(&mask);
  }
  return std::max<int64_t>(std::thread::hardware_concurrency(), 1);
#endif
}

}  // namespace dlb
