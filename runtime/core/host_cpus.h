// The CPUs this process may run on: its affinity mask (sched_getaffinity), which a cpuset narrows
// (taskset, a container's --cpuset-cpus, a batch job's cgroup), where
// std::thread::hardware_concurrency counts every CPU the machine has online. What dlbench sizes
// the threads and ranks it starts by; OpenMP's default pool and Open MPI's slots count the same.
#pragma once
#include <cstdint>

namespace dlb {

// At least 1; hardware_concurrency where the mask cannot be read.
int64_t usable_cpus();

}  // namespace dlb
