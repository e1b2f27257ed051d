// The CPUs this process may run on: its affinity mask, which a cpuset narrows (taskset, a
// container's --cpuset-cpus, a batch job's cgroup), where std::thread::hardware_concurrency counts
// every CPU the machine has online. What dlbench sizes the threads and ranks it starts by. Counted
// as OpenMP counts them for its default pool (omp_get_num_procs, where the build has OpenMP: it
// still sees every CPU after OMP_PROC_BIND has pinned the main thread to one), else
// sched_getaffinity of the calling thread. Open MPI counts cores unless --use-hwthread-cpus,
// which the launcher passes where it maps ranks to CPUs.
#pragma once
#include <cstdint>
#include <vector>

namespace dlb {

// At least 1; hardware_concurrency where the mask cannot be read.
int64_t usable_cpus();

// The CPUs this process's compute threads run on, as a set: bit c % 64 of word c / 64 is CPU c.
// Where OpenMP binds its threads to places (OMP_PROC_BIND other than false), the places' CPUs,
// which it took from the mask the process started with (an OMP_PLACES list may name fewer than
// usable_cpus counts); else this thread's affinity mask; every CPU online where neither can be
// read. Never empty.
std::vector<uint64_t> usable_cpu_set();
// The CPUs in such a set.
int64_t cpu_count(const std::vector<uint64_t>& set);

// A number that processes on one machine share and processes on two machines do not: the
// kernel's boot id (containers on one machine share its kernel, and so its CPUs), else the host
// name.
uint64_t machine_key();

}  // namespace dlb
