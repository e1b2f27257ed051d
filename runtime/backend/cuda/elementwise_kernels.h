// The element-wise kernels' math (kernel_layout.h says how these headers work): fill, casts,
// ReLU, add, accumulate, dropout and a device counter's increment. Host-compilable.
#pragma once
#include <cstdint>

#include "runtime/backend/cuda/kernel_layout.h"
#include "runtime/backend/cuda/stored.h"
#include "runtime/core/counter_hash.h"
#include "runtime/core/host_device.h"

namespace dlb::cuda {

template <typename T>
struct Fill {
  static constexpr const char* kName = "fill";
  T* p;
  T value;  // already stored as T
  DLB_HD void operator()(int64_t i) const { p[i] = value; }
};

// dst = src, converted element-wise (to nearest even where dst is narrower; exact where wider).
// One 16-bit type into the other goes through float, exactly on the way in, as the CPU's does.
// `to` moves element i of an NCHW source to its place in a channels-last destination.
template <typename S, typename D>
struct Cast {
  static constexpr const char* kName = "cast";
  const S* src;
  D* dst;
  ToChannelsLast to;
  DLB_HD void operator()(int64_t i) const { dst[to(i)] = stored<D>(load(src[i])); }
};

// The vectorized functors below also run 16 bytes of elements per call (vec: elements
// [i, i + kVec), i a multiple of kVec) where aligned() says their tensors start 16-byte aligned;
// launch_for_each then takes that form (launch.h, launch_shape), and the tail by index. Both
// forms apply the same element rule, so they store the same bits.

template <typename T>
struct ReluForward {
  static constexpr const char* kName = "relu forward";
  static constexpr int kVec = Pack<T>::kSize;
  const T* x;
  T* y;
  // NaN and -0 fail the comparison and pass through, as in torch.relu.
  DLB_HD static T rule(T in) {
    const float v = load(in);
    return stored<T>(v < 0.f ? 0.f : v);
  }
  DLB_HD void operator()(int64_t i) const { y[i] = rule(x[i]); }
  DLB_HD bool aligned() const { return aligned16(x) && aligned16(y); }
  DLB_HD void vec(int64_t i) const {
    Pack<T> v = pack_at(x, i);
    for (int k = 0; k < kVec; ++k) v.v[k] = rule(v.v[k]);
    put_pack(y, i, v);
  }
};

// Reads the output, as the CPU backend does: y > 0 exactly where x > 0. As PyTorch's
// threshold_backward, the gradient passes where y is not <= 0, NaN included.
template <typename T>
struct ReluBackward {
  static constexpr const char* kName = "relu backward";
  static constexpr int kVec = Pack<T>::kSize;
  const T* y;
  const T* dy;
  T* dx;
  DLB_HD static T rule(T out, T grad) { return stored<T>(load(out) <= 0.f ? 0.f : load(grad)); }
  DLB_HD void operator()(int64_t i) const { dx[i] = rule(y[i], dy[i]); }
  DLB_HD bool aligned() const { return aligned16(y) && aligned16(dy) && aligned16(dx); }
  DLB_HD void vec(int64_t i) const {
    const Pack<T> out = pack_at(y, i);
    Pack<T> g = pack_at(dy, i);
    for (int k = 0; k < kVec; ++k) g.v[k] = rule(out.v[k], g.v[k]);
    put_pack(dx, i, g);
  }
};

template <typename T>
struct Add {
  static constexpr const char* kName = "add";
  static constexpr int kVec = Pack<T>::kSize;
  const T* a;
  const T* b;
  T* y;
  DLB_HD static T rule(T u, T v) { return stored<T>(load(u) + load(v)); }
  DLB_HD void operator()(int64_t i) const { y[i] = rule(a[i], b[i]); }
  DLB_HD bool aligned() const { return aligned16(a) && aligned16(b) && aligned16(y); }
  DLB_HD void vec(int64_t i) const {
    Pack<T> u = pack_at(a, i);
    const Pack<T> v = pack_at(b, i);
    for (int k = 0; k < kVec; ++k) u.v[k] = rule(u.v[k], v.v[k]);
    put_pack(y, i, u);
  }
};

template <typename T>
struct Accumulate {  // y += x
  static constexpr const char* kName = "accumulate";
  static constexpr int kVec = Pack<T>::kSize;
  const T* x;
  T* y;
  DLB_HD static T rule(T sum, T v) { return stored<T>(load(sum) + load(v)); }
  DLB_HD void operator()(int64_t i) const { y[i] = rule(y[i], x[i]); }
  DLB_HD bool aligned() const { return aligned16(x) && aligned16(y); }
  DLB_HD void vec(int64_t i) const {
    Pack<T> sum = pack_at(y, i);
    const Pack<T> v = pack_at(x, i);
    for (int k = 0; k < kVec; ++k) sum.v[k] = rule(sum.v[k], v.v[k]);
    put_pack(y, i, sum);
  }
};

// Inverted dropout: element i is dropped when counter_uniform(seed, i) < p, else scaled by
// 1/(1-p) as the mask stores it; the mask holds 0 or that scale, and backward multiplies by it.
// The seed is `seed` plus the step counter at `step` (null: plus 0), read when the kernel runs,
// so a replayed graph draws each step's own mask (DropoutSeed, backend.h).
template <typename T>
struct DropoutForward {
  static constexpr const char* kName = "dropout forward";
  const T* x;
  float p;
  uint64_t seed;
  const int64_t* step;
  T* mask;
  T* y;
  DLB_HD void operator()(int64_t i) const {
    const float keep_scale = load(stored<T>(1.f / (1.f - p)));
    const uint64_t s = seed + (step ? static_cast<uint64_t>(*step) : 0);
    const float m = counter_uniform(s, static_cast<uint64_t>(i)) < p ? 0.f : keep_scale;
    mask[i] = stored<T>(m);
    y[i] = stored<T>(load(x[i]) * m);
  }
};

template <typename T>
struct DropoutBackward {
  static constexpr const char* kName = "dropout backward";
  const T* dy;
  const T* mask;
  T* dx;
  DLB_HD void operator()(int64_t i) const { dx[i] = stored<T>(load(dy[i]) * load(mask[i])); }
};

// A counter in device memory (the step counter, num_batches_tracked): counter[0] += 1, one index.
struct Increment {
  static constexpr const char* kName = "increment";
  int64_t* counter;
  DLB_HD void operator()(int64_t) const { *counter += 1; }
};

}  // namespace dlb::cuda
