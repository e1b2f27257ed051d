// How a rank's all-reduces share the cores that compute: on a host whose reductions run there
// (MPI on host buffers, its progress thread with no core of its own), measured by `dlbench bench
// allreduce` (its rows' beside_compute); for GPUs, whose collectives have engines and links of
// their own, nothing.
//   lost:    the compute a rank loses per microsecond of a reduction's time alone. 1: it
//            computes nothing for that time. It passes 1 where the reduction beside the work also
//            slows it through the caches and memory they share.
//   stretch: the reduction's time beside compute over its time alone (at least 1).
// The replay (runtime/train/replay.h) models them as the cores' sharing.
#pragma once

namespace dlb {

struct CoreSharing {
  double lost = 0, stretch = 1;
};

// The most a network file may give: beyond them a measurement is broken, not a host.
inline constexpr double kMaxBlocksCompute = 10, kMaxStretch = 100;

}  // namespace dlb
