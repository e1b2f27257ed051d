// How a run's ranks share the machine each of them is on: how many of them run there, and the
// CPUs they may use between them (the union of their usable_cpu_set, runtime/core/host_cpus.h).
// The ranks measure it themselves, by machine_key and CPU set, so it holds under any launcher and
// any binding: mpirun's --map-by, srun's --cpus-per-task, taskset around mpirun, a container's
// cpuset. A rank bound to its own CPUs sees only them; the union is what the machine gave the run.
#pragma once
#include <cstdint>
#include <vector>

namespace dlb {

class Communicator;

struct HostShare {
  int64_t ranks = 1;     // of this run on this machine, this one included
  int64_t cpus = 1;      // the CPUs those ranks may use between them
  int64_t own_cpus = 1;  // this rank's
  // What one rank may count on: an equal share of the machine's CPUs for the run, no more than
  // its own; at least 1.
  int64_t cpus_per_rank() const;
  // More threads than CPUs: `threads_per_rank` on each of the ranks, or on this rank's own CPUs.
  bool oversubscribed(int64_t threads_per_rank) const;
};

// Pure: rank `me`'s share, from every rank's machine key and CPU set (indexed by rank). An empty
// set counts as one CPU (usable_cpu_set never gives one).
HostShare host_share_of(int me, const std::vector<uint64_t>& keys,
                        const std::vector<std::vector<uint64_t>>& sets);

// Collective: every rank of `comm` calls it, with its own machine_key and usable_cpu_set.
HostShare measure_host_share(Communicator& comm);

}  // namespace dlb
