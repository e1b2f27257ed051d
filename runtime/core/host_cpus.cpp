#include "runtime/core/host_cpus.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <thread>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "runtime/core/hash.h"

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

namespace {

void add_cpu(std::vector<uint64_t>& set, int cpu) {
  if (cpu < 0) return;
  const auto word = static_cast<size_t>(cpu) / 64;
  if (set.size() <= word) set.resize(word + 1, 0);
  set[word] |= uint64_t{1} << (cpu % 64);
}

// This thread's affinity mask, as a set.
std::vector<uint64_t> thread_mask() {
  std::vector<uint64_t> set;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return set;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &mask)) add_cpu(set, c);
  }
  return set;
}

}  // namespace

std::vector<uint64_t> usable_cpu_set() {
#ifdef _OPENMP
  // Bound by OMP_PROC_BIND, this thread's mask is one place; the places hold them all.
  if (const int places = omp_get_num_places(); places > 0) {
    std::vector<uint64_t> set;
    for (int p = 0; p < places; ++p) {
      std::vector<int> ids(static_cast<size_t>(std::max(omp_get_place_num_procs(p), 0)));
      if (!ids.empty()) omp_get_place_proc_ids(p, ids.data());
      for (const int id : ids) add_cpu(set, id);
    }
    return set;
  }
#endif
  return thread_mask();
}

uint64_t machine_key() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!(boot >> id) || id.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    id = host;
  }
  return fnv1a(id.data(), id.size());
}

}  // namespace dlb
