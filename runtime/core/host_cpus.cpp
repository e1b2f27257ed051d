#include "runtime/core/host_cpus.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <bitset>
#include <cerrno>
#include <fstream>
#include <string>
#include <thread>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "runtime/core/hash.h"

namespace dlb {

namespace {

void add_cpu(std::vector<uint64_t>& set, int cpu) {
  if (cpu < 0) return;
  const auto word = static_cast<size_t>(cpu) / 64;
  if (set.size() <= word) set.resize(word + 1, 0);
  set[word] |= uint64_t{1} << (cpu % 64);
}

// This thread's affinity mask, as a set: sized for the kernel's CPUs (sched_getaffinity refuses a
// mask smaller than they are, as a cpu_set_t is past 1,024 of them). Empty where unreadable.
std::vector<uint64_t> thread_mask() {
  std::vector<uint64_t> set;
  for (int cpus = 1024; cpus <= (1 << 20); cpus *= 2) {
    cpu_set_t* mask = CPU_ALLOC(cpus);
    if (!mask) return set;
    const size_t bytes = CPU_ALLOC_SIZE(cpus);
    CPU_ZERO_S(bytes, mask);
    const int got = sched_getaffinity(0, bytes, mask);
    const int error = errno;
    if (got == 0) {
      for (int c = 0; c < cpus; ++c) {
        if (CPU_ISSET_S(c, bytes, mask)) add_cpu(set, c);
      }
    }
    CPU_FREE(mask);
    if (got == 0 || error != EINVAL) return set;
  }
  return set;
}

#ifdef _OPENMP
// The CPUs of OpenMP's places, where its threads are bound to them (OMP_PROC_BIND other than
// false: the main thread's mask is then one place). Empty where they are not.
std::vector<uint64_t> bound_places() {
  std::vector<uint64_t> set;
  if (omp_get_proc_bind() == omp_proc_bind_false) return set;
  for (int p = 0; p < omp_get_num_places(); ++p) {
    std::vector<int> ids(static_cast<size_t>(std::max(omp_get_place_num_procs(p), 0)));
    if (!ids.empty()) omp_get_place_proc_ids(p, ids.data());
    for (const int id : ids) add_cpu(set, id);
  }
  return set;
}
#endif

// Every CPU the machine has online, where no mask can be read.
std::vector<uint64_t> every_cpu() {
  std::vector<uint64_t> set;
  const int64_t n = std::max<int64_t>(std::thread::hardware_concurrency(), 1);
  for (int c = 0; c < n; ++c) add_cpu(set, c);
  return set;
}

}  // namespace

int64_t cpu_count(const std::vector<uint64_t>& set) {
  int64_t n = 0;
  for (const uint64_t w : set) n += static_cast<int64_t>(std::bitset<64>(w).count());
  return n;
}

int64_t usable_cpus() {
#ifdef _OPENMP
  // OpenMP's count: the mask the process started with, even where OMP_PROC_BIND has since bound
  // this thread to one place.
  return std::max(omp_get_num_procs(), 1);
#else
  return cpu_count(usable_cpu_set());
#endif
}

std::vector<uint64_t> usable_cpu_set() {
  std::vector<uint64_t> set;
#ifdef _OPENMP
  set = bound_places();
#endif
  if (cpu_count(set) == 0) set = thread_mask();
  if (cpu_count(set) == 0) set = every_cpu();
  return set;
}

uint64_t machine_key() {
  // The first of these that reads: the kernel's boot, the installation's id, the host's name.
  std::string id;
  for (const char* path : {"/proc/sys/kernel/random/boot_id", "/etc/machine-id"}) {
    std::ifstream in(path);
    if (in >> id && !id.empty()) return fnv1a(id.data(), id.size());
  }
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) id = host;
  return fnv1a(id.data(), id.size());
}

}  // namespace dlb
