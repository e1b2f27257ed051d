#include "runtime/core/host_cpus.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace dlb {

int64_t usable_cpus() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0 && CPU_COUNT(&mask) > 0) {
    return CPU_COUNT(&mask);
  }
  return std::max<int64_t>(std::thread::hardware_concurrency(), 1);
}

}  // namespace dlb
