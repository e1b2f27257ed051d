// What each rank sends (and receives) of a buffer all-reduced across `ranks` ranks by a ring or
// by halving and doubling: 2(n-1)/n of it, nccl-tests' bus-bandwidth factor (bus bandwidth =
// bytes / time x this). 0 for one rank. The one statement of it: the comm metrics, the
// simulator's models and their fit, and bench-allreduce read it here.
#pragma once

namespace dlb {

constexpr double allreduce_share(double ranks) { return ranks > 1 ? 2 * (ranks - 1) / ranks : 0; }

}  // namespace dlb
