// Launching the kernels of *_kernels.h: the grid of a grid-stride loop (a pure function, tested on
// the host); launch_for_each, which runs a functor over [0, n) on a stream; and
// launch_channel_reduce, a block per channel (channel_reduce.h). Host-compilable:
// the launch itself is defined in launch.cuh, and instantiated for every functor in its family's
// .cu file.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "runtime/core/stream_ref.h"

namespace dlb::cuda {

struct Grid {
  int64_t blocks = 0;  // 0: nothing to launch
  int threads = 0;
};

// Threads per block of the element-wise kernels, and the most blocks a grid-stride loop uses:
// enough to fill any current GPU many times over (H100: 132 SMs x 2048 threads) while each thread
// still does a few iterations on large tensors.
constexpr int kThreadsPerBlock = 256;
constexpr int64_t kMaxBlocks = 32768;

// A grid covering [0, n) with a grid-stride loop: every index is visited exactly once, by thread
// (i % (blocks * threads)) in iteration i / (blocks * threads).
inline Grid grid_for(int64_t n, int threads = kThreadsPerBlock, int64_t max_blocks = kMaxBlocks) {
  if (n <= 0) return {0, threads};
  return {std::min<int64_t>((n + threads - 1) / threads, max_blocks), threads};
}

// Whether functor F has a vectorized form: kVec elements per call of f.vec(i), where f.aligned()
// (elementwise_kernels.h).
template <typename F, typename = void>
struct HasVec : std::false_type {};
template <typename F>
struct HasVec<F, std::void_t<decltype(&F::vec)>> : std::true_type {};

// How launch_for_each runs a functor over [0, n): a grid-stride loop over `items`, each `vec`
// elements (a vectorized functor whose tensors are aligned, and n at least one pack: f.vec over
// n / vec packs, then the last n % vec elements by index, one per thread), or one element each;
// its loop indices in 32 bits where every index the loop forms (up to n plus the grid's threads)
// fits, in 64 otherwise.
struct LaunchShape {
  int64_t items = 0;
  int vec = 1;
  bool index32 = true;
  Grid grid;
};
template <typename F>
LaunchShape launch_shape(int64_t n, const F& f) {
  LaunchShape s;
  if constexpr (HasVec<F>::value) {
    if (n >= F::kVec && f.aligned()) s.vec = F::kVec;
  }
  s.items = n / s.vec;
  s.grid = grid_for(s.items);
  s.index32 = n + s.grid.blocks * s.grid.threads <= std::numeric_limits<int32_t>::max();
  return s;
}

// Runs f(i) for every i in [0, n) on `stream`, asynchronously, as launch_shape says. F is a
// functor of a *_kernels.h.
template <typename F>
void launch_for_each(StreamRef stream, int64_t n, const F& f);

// Runs the per-channel reduction R (channel_reduce.h) over `channels` channels of `per_channel`
// values each, one block per (channel, part), asynchronously: part p of channel c goes to
// out[c * parts + p]. R is a reduction of batch_norm_kernels.h (an Acc and an add).
template <typename R>
void launch_channel_reduce(StreamRef stream, int64_t channels, int64_t per_channel, int64_t parts,
                           const R& r, typename R::Acc* out);

}  // namespace dlb::cuda
