// The element-wise kernels' vectorized form (elementwise_kernels.h: 16 bytes per call where the
// tensors are aligned) and the launch's choice of it (launch.h, launch_shape), on the host: the
// same bits as one element per call, for every element count around a pack's size, and the
// shape a launch takes for aligned, misaligned, short and huge tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/backend/cuda/elementwise_kernels.h"
#include "runtime/backend/cuda/launch.h"
#include "runtime/core/rng.h"

namespace dlb::cuda {
namespace {

// What the launch does, on the host: f.vec over the packs, then the tail by index; or every
// index.
template <typename F>
void run_as_launched(int64_t n, const F& f) {
  const LaunchShape s = launch_shape(n, f);
  if constexpr (HasVec<F>::value) {
    if (s.vec > 1) {
      for (int64_t k = 0; k < s.items; ++k) f.vec(k * s.vec);
      for (int64_t i = s.items * s.vec; i < n; ++i) f(i);
      return;
    }
  }
  for (int64_t i = 0; i < n; ++i) f(i);
}

template <typename F>
void run_by_index(int64_t n, const F& f) {
  for (int64_t i = 0; i < n; ++i) f(i);
}

// Aligned storage of T with values of both signs, zeros, a NaN and a -0.
template <typename T>
struct Buffer {
  explicit Buffer(int64_t n, uint64_t seed) : bytes(static_cast<size_t>(n) * sizeof(T) + 64) {
    Rng rng(seed);
    for (int64_t i = 0; i < n; ++i) {
      float v = rng.uniform(-2.f, 2.f);
      if (i % 7 == 3) v = 0.f;
      if (i % 11 == 5) v = -0.f;
      if (i == 9) v = NAN;
      data()[i] = stored<T>(v);
    }
  }
  T* data() {
    auto p = reinterpret_cast<uintptr_t>(bytes.data());
    return reinterpret_cast<T*>((p + 15) / 16 * 16);
  }
  std::vector<uint8_t> read(int64_t n) {
    const auto* b = reinterpret_cast<const uint8_t*>(data());
    return {b, b + n * static_cast<int64_t>(sizeof(T))};
  }
  std::vector<uint8_t> bytes;
};

template <typename T>
class Vectorized : public ::testing::Test {};
struct TypeNames {
  template <typename T>
  static std::string GetName(int) {
    return std::string(dtype_name(StorageDType<T>::value));
  }
};
using Types = ::testing::Types<float, F16, BF16>;
TYPED_TEST_SUITE(Vectorized, Types, TypeNames);

// Both forms of `make(a, b, y)`'s functor over n elements, from the same inputs: the outputs'
// bytes, launched and by index.
template <typename T, typename Make>
void expect_same_bits(int64_t n, Make make) {
  Buffer<T> a(n, 1), b(n, 2), y1(n, 3), y2(n, 3);
  run_as_launched(n, make(a.data(), b.data(), y1.data()));
  run_by_index(n, make(a.data(), b.data(), y2.data()));
  EXPECT_EQ(y1.read(n), y2.read(n)) << "n = " << n;
}

TYPED_TEST(Vectorized, EveryFormStoresTheSameBits) {
  using T = TypeParam;
  for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 31, 1000, 1003}) {
    expect_same_bits<T>(n, [](T* a, T*, T* y) { return ReluForward<T>{a, y}; });
    expect_same_bits<T>(n, [](T* a, T* b, T* y) { return ReluBackward<T>{a, b, y}; });
    expect_same_bits<T>(n, [](T* a, T* b, T* y) { return Add<T>{a, b, y}; });
    expect_same_bits<T>(n, [](T* a, T*, T* y) { return Accumulate<T>{a, y}; });
    // In place, as batch norm's fallback applies its ReLU: y = relu(y).
    expect_same_bits<T>(n, [](T*, T*, T* y) { return ReluForward<T>{y, y}; });
  }
}

TYPED_TEST(Vectorized, ALaunchVectorizesOnlyAlignedTensorsOfAPackOrMore) {
  using T = TypeParam;
  constexpr int kPack = 16 / sizeof(T);
  Buffer<T> a(4096, 1), y(4096, 2);
  const LaunchShape aligned = launch_shape(1000, Add<T>{a.data(), a.data(), y.data()});
  EXPECT_EQ(aligned.vec, kPack);
  EXPECT_EQ(aligned.items, 1000 / kPack);
  EXPECT_TRUE(aligned.index32);
  // One element off: a view at an odd offset takes the scalar form.
  const LaunchShape off = launch_shape(1000, Add<T>{a.data() + 1, a.data(), y.data()});
  EXPECT_EQ(off.vec, 1);
  EXPECT_EQ(off.items, 1000);
  EXPECT_EQ(launch_shape(kPack - 1, ReluForward<T>{a.data(), y.data()}).vec, 1);
  // A functor without a vectorized form: one element each.
  EXPECT_EQ(launch_shape(1000, Fill<T>{y.data(), stored<T>(1.f)}).vec, 1);
}

TEST(LaunchShape, IndicesAre32BitWhereEveryIndexTheLoopFormsFits) {
  const Fill<float> f{nullptr, 0.f};
  const int64_t max32 = 2147483647;
  EXPECT_TRUE(launch_shape(1 << 20, f).index32);
  const LaunchShape big = launch_shape(max32, f);  // n itself fits, n + the grid's threads not
  EXPECT_FALSE(big.index32);
  const int64_t threads = big.grid.blocks * big.grid.threads;
  EXPECT_TRUE(launch_shape(max32 - threads, f).index32);
  EXPECT_FALSE(launch_shape(max32 - threads + 1, f).index32);
  EXPECT_FALSE(launch_shape(int64_t{1} << 40, f).index32);
}

}  // namespace
}  // namespace dlb::cuda
