// Per-channel reductions on the GPU (batch norm's statistics and its backward sums, when cuDNN
// has no engine for a batch-norm graph): one block of kReduceThreads threads per (channel, part).
//   - A channel's m = N * H * W values are split into `parts` contiguous spans (reduce_parts:
//     one part unless the channels alone leave the GPU idle, as resnet50's first batch norm, 64
//     channels of 3.2 million values at batch 256, would).
//   - Thread t of a part folds values begin + t, begin + t + kReduceThreads, ... into its own
//     accumulator (R::add, given each value's storage offset by a ChannelWalk): in NCHW
//     consecutive threads read consecutive addresses (unless a channel has few pixels).
//   - The block merges its threads' accumulators in a fixed tree: within each warp by shuffles
//     at distances 16, 8, 4, 2, 1 (lane i takes lane i + d), then the eight warps' results the
//     same way, padded with empty accumulators. merge_block below is that tree on the host.
//   - A part's accumulator goes to out[channel * parts + part]; a functor of batch_norm_kernels.h
//     then merges each channel's parts in part order and finishes.
// Accumulators are aggregates of doubles (shuffled as doubles; an empty one is Acc{}): Welford's
// count, mean and sum of squared deviations for the variance (Chan et al.'s merge), or plain
// sums. reduce_channels_on_host runs R as the device does, thread by thread and tree by tree, so
// tests check the GPU's grouping of the sums against the CPU backend without a GPU. (Not bit for
// bit: nvcc contracts multiply-adds into FMAs, the host build does not.)
// Host-compilable: includes nothing of CUDA.
#pragma once
#include <cstdint>

#include "runtime/backend/cuda/kernel_layout.h"
#include "runtime/core/host_device.h"

namespace dlb::cuda {

constexpr int kReduceThreads = 256;
constexpr int kWarpSize = 32;
constexpr int kReduceWarps = kReduceThreads / kWarpSize;

// Welford's running mean and sum of squared deviations (m2) of the values added, in double; the
// variance is m2 / count. Merging two is exact in count and, as adding, one rounding per term.
struct Welford {
  double count, mean, m2;
  DLB_HD void add(double v) {
    count += 1;
    const double d = v - mean;
    mean += d / count;
    m2 += d * (v - mean);
  }
  DLB_HD static Welford merge(const Welford& a, const Welford& b) {
    if (b.count == 0) return a;
    if (a.count == 0) return b;
    const double n = a.count + b.count, d = b.mean - a.mean;
    return {n, a.mean + d * (b.count / n), a.m2 + b.m2 + d * d * (a.count * b.count / n)};
  }
};

// Two sums in double (batch norm's backward: of dy and of dy * xhat).
struct SumPair {
  double first, second;
  DLB_HD static SumPair merge(const SumPair& a, const SumPair& b) {
    return {a.first + b.first, a.second + b.second};
  }
};

// Part `part` of a channel's [0, per_channel) values: equal spans, the last one shorter.
struct ReduceSpan {
  int64_t begin, end;
};
DLB_HD ReduceSpan part_span(int64_t per_channel, int64_t parts, int64_t part) {
  const int64_t each = (per_channel + parts - 1) / parts;
  const int64_t begin = part * each < per_channel ? part * each : per_channel;
  return {begin, begin + each < per_channel ? begin + each : per_channel};
}

// Parts per channel: enough for about 1,024 blocks in all (a wave of resident blocks on an H100:
// 132 SMs x 8 blocks of 256 threads is 1,056), but each part keeps at least 16,384 values (64 per
// thread), so one part while the channels alone give the blocks or a channel is small. Never more
// than 1,024: within a grid's y dimension (65,535).
inline int64_t reduce_parts(int64_t channels, int64_t per_channel) {
  constexpr int64_t kBlocks = 1024, kMinPerPart = 16384;
  static_assert(kBlocks <= 65535, "parts are a grid's y dimension");
  if (channels <= 0 || per_channel <= 0) return 1;
  int64_t parts = (kBlocks + channels - 1) / channels;
  const int64_t most = per_channel / kMinPerPart;
  if (parts > most) parts = most;
  return parts < 1 ? 1 : parts;
}

// Thread t's walk over channel c's values j = begin + t, then + stride, ...: each value's storage
// offset, advanced without a 64-bit division per value (a long routine on a GPU): the pixel moves
// by the stride and carries into the image only when it wraps. At value j it is at
// layout.value_at(c, j).
struct ChannelWalk {
  ChannelRows layout;
  int64_t c, n, k;
  DLB_HD ChannelWalk(const ChannelRows& l, int64_t channel, int64_t j)
      : layout(l), c(channel), n(j / l.inner), k(j % l.inner) {}
  DLB_HD int64_t offset() const {
    return layout.channels_last ? (n * layout.inner + k) * layout.channels + c
                                : (n * layout.channels + c) * layout.inner + k;
  }
  DLB_HD void advance(int64_t stride) {
    k += stride;
    if (k >= layout.inner) {
      n += k / layout.inner;
      k %= layout.inner;
    }
  }
};

// The block's tree over kReduceThreads accumulators (acc is overwritten), as the device merges
// them: in each warp, for d = 16, 8, 4, 2, 1, lane i < d takes merge(lane i, lane i + d); then the
// warps' first lanes, padded to a warp with empty accumulators, the same way. Returns lane 0's.
template <typename Acc>
Acc merge_block(Acc* acc) {
  const auto warp_tree = [](Acc* lanes) {
    for (int d = kWarpSize / 2; d > 0; d /= 2) {
      for (int i = 0; i < d; ++i) lanes[i] = Acc::merge(lanes[i], lanes[i + d]);
    }
    return lanes[0];
  };
  Acc warps[kWarpSize]{};
  for (int w = 0; w < kReduceWarps; ++w) warps[w] = warp_tree(acc + w * kWarpSize);
  return warp_tree(warps);
}

// R over every (channel, part) on the host, as launch_channel_reduce runs it on the device.
template <typename R>
void reduce_channels_on_host(const R& r, int64_t channels, int64_t per_channel, int64_t parts,
                             typename R::Acc* out) {
  using Acc = typename R::Acc;
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t part = 0; part < parts; ++part) {
      const ReduceSpan span = part_span(per_channel, parts, part);
      Acc acc[kReduceThreads]{};
      for (int t = 0; t < kReduceThreads; ++t) {
        ChannelWalk walk(r.layout, c, span.begin + t);
        for (int64_t j = span.begin + t; j < span.end; j += kReduceThreads) {
          r.add(acc[t], c, walk.offset());
          walk.advance(kReduceThreads);
        }
      }
      out[c * parts + part] = merge_block(acc);
    }
  }
}

}  // namespace dlb::cuda
