// What every family's .cu file uses to launch its functors: the grid-stride loop over one functor
// (launch_for_each) and the block-per-channel reduction (launch_channel_reduce, channel_reduce.h),
// both defined here and instantiated, by the macros below, in the .cu file of the functor's
// family. Included only by .cu files.
#pragma once
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstring>

#include "runtime/backend/cuda/channel_reduce.h"
#include "runtime/backend/cuda/cuda_check.h"
#include "runtime/backend/cuda/launch.h"
#include "runtime/backend/cuda/stored.h"
#include "runtime/core/error.h"

namespace dlb::cuda {
// Named, not anonymous: this header is in six .cu files, and the launch templates below, defined
// in each, must mean the same kernels in each (each functor is instantiated in one .cu only).
namespace detail {

// I: the loop's index type, int32_t where launch_shape found every index fits.
template <typename F, typename I>
__global__ void for_each_index(I n, F f) {
  const I stride = static_cast<I>(gridDim.x) * static_cast<I>(blockDim.x);
  for (I i = static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) + static_cast<I>(threadIdx.x);
       i < n; i += stride) {
    f(i);
  }
}

// F::kVec elements per f.vec call over `packs` packs, then the last n - packs * kVec (fewer than
// kVec) by index, one per thread of the first block.
template <typename F, typename I>
__global__ void for_each_pack(I packs, I n, F f) {
  const I first =
      static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) + static_cast<I>(threadIdx.x);
  const I stride = static_cast<I>(gridDim.x) * static_cast<I>(blockDim.x);
  for (I k = first; k < packs; k += stride) f.vec(static_cast<int64_t>(k) * F::kVec);
  const I tail = packs * F::kVec + first;
  if (tail < n) f(tail);
}

template <typename F, typename I>
void launch_shaped(cudaStream_t stream, const LaunchShape& s, int64_t n, const F& f) {
  const auto blocks = static_cast<unsigned>(s.grid.blocks);
  if constexpr (HasVec<F>::value) {
    if (s.vec > 1) {
      for_each_pack<F, I>
          <<<blocks, s.grid.threads, 0, stream>>>(static_cast<I>(s.items), static_cast<I>(n), f);
      return;
    }
  }
  for_each_index<F, I><<<blocks, s.grid.threads, 0, stream>>>(static_cast<I>(n), f);
}

// v of lane + d (a lane past the warp's end gets its own), shuffled as doubles: the accumulators
// of channel_reduce.h are aggregates of doubles.
template <typename A>
__device__ A shuffle_down(const A& v, int d) {
  static_assert(sizeof(A) % sizeof(double) == 0, "an accumulator is doubles");
  constexpr int kDoubles = sizeof(A) / sizeof(double);
  double words[kDoubles];
  memcpy(words, &v, sizeof(A));
  for (int i = 0; i < kDoubles; ++i) words[i] = __shfl_down_sync(0xffffffffu, words[i], d);
  A out;
  memcpy(&out, words, sizeof(A));
  return out;
}
// Lane 0 ends with the warp's tree (channel_reduce.h's merge_block, one warp of it).
template <typename A>
__device__ A warp_merge(A v) {
  for (int d = kWarpSize / 2; d > 0; d /= 2) v = A::merge(v, shuffle_down(v, d));
  return v;
}

template <typename R>
__global__ void __launch_bounds__(kReduceThreads)
    channel_reduce(R r, int64_t per_channel, int64_t parts, typename R::Acc* out) {
  using Acc = typename R::Acc;
  __shared__ Acc warps[kReduceWarps];
  const int64_t c = blockIdx.x, part = blockIdx.y;
  const ReduceSpan span = part_span(per_channel, parts, part);
  Acc acc{};
  ChannelWalk walk(r.layout, c, span.begin + threadIdx.x);
  for (int64_t j = span.begin + threadIdx.x; j < span.end; j += kReduceThreads) {
    r.add(acc, c, walk.offset());
    walk.advance(kReduceThreads);
  }
  acc = warp_merge(acc);
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  if (lane == 0) warps[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < kReduceWarps ? warps[lane] : Acc{};
    acc = warp_merge(acc);
    if (lane == 0) out[c * parts + part] = acc;
  }
}

}  // namespace detail

template <typename R>
void launch_channel_reduce(StreamRef stream, int64_t channels, int64_t per_channel, int64_t parts,
                           const R& r, typename R::Acc* out) {
  if (channels <= 0) return;
  if (parts < 1 || parts > 65535 || channels > 0x7fffffff) {
    throw InvalidArgument(fmt::format(
        "cuda: a reduction over {} channels in {} parts does not fit a grid", channels, parts));
  }
  const dim3 grid(static_cast<unsigned>(channels), static_cast<unsigned>(parts));
  detail::channel_reduce<<<grid, kReduceThreads, 0, static_cast<cudaStream_t>(stream.native)>>>(
      r, per_channel, parts, out);
  DLB_CUDA_CHECK(cudaGetLastError());
}

template <typename F>
void launch_for_each(StreamRef stream, int64_t n, const F& f) {
  const LaunchShape s = launch_shape(n, f);
  if (s.grid.blocks == 0) return;
  const auto native = static_cast<cudaStream_t>(stream.native);
  if (s.index32) {
    detail::launch_shaped<F, int32_t>(native, s, n, f);
  } else {
    detail::launch_shaped<F, int64_t>(native, s, n, f);
  }
  DLB_CUDA_CHECK(cudaGetLastError());
}

#define DLB_INSTANTIATE(...) \
  template void launch_for_each<__VA_ARGS__>(StreamRef, int64_t, const __VA_ARGS__&);
// A functor over each storage type: f32, and fp16 and bf16 storage.
#define DLB_INSTANTIATE_STORED(K) \
  DLB_INSTANTIATE(K<float>)       \
  DLB_INSTANTIATE(K<F16>)         \
  DLB_INSTANTIATE(K<BF16>)
#define DLB_INSTANTIATE_CAST_FROM(S) \
  DLB_INSTANTIATE(Cast<S, float>)    \
  DLB_INSTANTIATE(Cast<S, F16>)      \
  DLB_INSTANTIATE(Cast<S, BF16>)
#define DLB_INSTANTIATE_REDUCE(...)                                                      \
  template void launch_channel_reduce<__VA_ARGS__>(StreamRef, int64_t, int64_t, int64_t, \
                                                   const __VA_ARGS__&, __VA_ARGS__::Acc*);
#define DLB_INSTANTIATE_REDUCE_STORED(R) \
  DLB_INSTANTIATE_REDUCE(R<float>)       \
  DLB_INSTANTIATE_REDUCE(R<F16>)         \
  DLB_INSTANTIATE_REDUCE(R<BF16>)

}  // namespace dlb::cuda
