#include "suites/harness/core/host_share.h"

#include <algorithm>

#include "runtime/comm/communicator.h"
#include "runtime/core/host_cpus.h"

namespace dlb {

int64_t HostShare::cpus_per_rank() const {
  return std::max<int64_t>(1, std::min(own_cpus, cpus / std::max<int64_t>(ranks, 1)));
}

bool HostShare::oversubscribed(int64_t threads_per_rank) const {
  // ranks x threads > cpus, without the product
  return threads_per_rank > cpus / std::max<int64_t>(ranks, 1) || threads_per_rank > own_cpus;
}

HostShare host_share_of(int me, const std::vector<uint64_t>& keys,
                        const std::vector<std::vector<uint64_t>>& sets) {
  HostShare s;
  if (me < 0 || static_cast<size_t>(me) >= std::min(keys.size(), sets.size())) return s;
  s.ranks = 0;
  std::vector<uint64_t> together;
  for (size_t r = 0; r < keys.size() && r < sets.size(); ++r) {
    if (keys[r] != keys[static_cast<size_t>(me)]) continue;
    ++s.ranks;
    if (together.size() < sets[r].size()) together.resize(sets[r].size(), 0);
    for (size_t w = 0; w < sets[r].size(); ++w) together[w] |= sets[r][w];
  }
  s.ranks = std::max<int64_t>(s.ranks, 1);
  s.cpus = std::max<int64_t>(cpu_count(together), 1);
  s.own_cpus = std::max<int64_t>(cpu_count(sets[static_cast<size_t>(me)]), 1);
  return s;
}

HostShare measure_host_share(Communicator& comm) {
  const std::vector<uint64_t> keys = comm.allgather(machine_key());
  std::vector<uint64_t> own = usable_cpu_set();
  // Every rank gathers as many words as the widest set has.
  uint64_t words = 0;
  for (const uint64_t n : comm.allgather(own.size())) words = std::max(words, n);
  own.resize(words, 0);
  std::vector<std::vector<uint64_t>> sets(keys.size(), std::vector<uint64_t>(words, 0));
  for (uint64_t w = 0; w < words; ++w) {
    const std::vector<uint64_t> word = comm.allgather(own[w]);
    for (size_t r = 0; r < sets.size() && r < word.size(); ++r) sets[r][w] = word[r];
  }
  return host_share_of(comm.rank(), keys, sets);
}

}  // namespace dlb
