// The CPUs this process may run on: its affinity mask, which a cpuset narrows (taskset, a
// container's --cpuset-cpus, a batch job's cgroup), where std::thread::hardware_concurrency counts
// every CPU the machine has online. What dlbench sizes the threads and ranks it starts by. Counted
// as OpenMP counts them for its default pool (omp_get_num_procs, where the build has OpenMP: it
// still sees every CPU after OMP_PROC_BIND has pinned the main thread to one), else
// sched_getaffinity of the calling thread. Open MPI counts cores unless --use-hwthread-cpus,
// which the launcher passes where it maps ranks to CPUs.
#pragma once
#include <cstdint>

namespace dlb {

// At least 1; hardware_concurrency where the mask cannot be read.
int64_t usable_cpus();

}  // namespace dlb
