// The CPU backend's loops compiled for AVX-512 give the bits of their x86-64 copy
// (runtime/backend/cpu/isa.h): every output of every loop, on data with the cases where rounding
// decides (ties, subnormals, signed zeros; infinities and NaN in one channel), at channel
// lengths that leave every lane count as a remainder. A NaN matches any NaN (same_bits). Skipped
// on a CPU without AVX-512, which never runs that copy.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "runtime/backend/cpu/batch_norm_loops.h"
#include "runtime/backend/cpu/isa.h"
#include "runtime/backend/cpu/pointwise_loops.h"
#include "runtime/backend/cpu/pool_loops.h"
#include "runtime/core/error.h"
#include "runtime/core/layout_order.h"

namespace dlb {
namespace {

// Values a batch norm meets, and the finite ones where a rounding or a comparison decides.
std::vector<float> hard_values(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.3f, 2.f);
  const float specials[] = {0.f,
                            -0.f,
                            1.f + std::ldexp(1.f, -8),   // a bf16 tie
                            1.f + std::ldexp(1.f, -11),  // an fp16 tie
                            std::numeric_limits<float>::denorm_min(),
                            -std::numeric_limits<float>::min(),
                            65504.f};  // fp16's largest
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = gen() % 13 == 0 ? specials[gen() % std::size(specials)] : normal(gen);
  }
  return v;
}

// [n, c, inner] values, channel 0's with an infinity, a NaN and a -infinity among them (which
// make that channel's statistics and outputs NaN; the others stay finite).
std::vector<float> batch(const BnDims& d, uint32_t seed) {
  std::vector<float> v = hard_values(static_cast<size_t>(d.n * d.c * d.inner), seed);
  const float non_finite[] = {std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::quiet_NaN(),
                              -std::numeric_limits<float>::infinity()};
  for (int64_t i = 0; i < d.n; ++i) v[static_cast<size_t>(i * d.c * d.inner)] = non_finite[i % 3];
  return v;
}

template <typename T>
std::vector<T> stored_values(const std::vector<float>& v) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = stored<T>(v[i]);
  return out;
}

// Bit for bit, but a NaN matches any NaN: where an operation meets two NaNs, which one it returns
// (its sign, its payload) is the compiler's choice of operand order, in either copy.
template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  EXPECT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) == 0) continue;
    if (std::isnan(load(a[i])) && std::isnan(load(b[i]))) continue;
    ADD_FAILURE() << "element " << i << ": " << load(a[i]) << " on x86-64, " << load(b[i])
                  << " on AVX-512";
    return false;
  }
  return true;
}

// One training pass's outputs, through `isa`'s loops.
struct TrainOut {
  std::vector<float> running_mean, running_var, save_mean, save_invstd;
};
template <typename T>
TrainOut train(CpuIsa isa, const BnDims& d, const std::vector<T>& x, std::vector<T>& y, bool relu,
               const std::vector<float>& gamma, const std::vector<float>& beta) {
  const size_t c = static_cast<size_t>(d.c);
  TrainOut o{std::vector<float>(c, 0.25f), std::vector<float>(c, 2.f), std::vector<float>(c),
             std::vector<float>(c)};
  const BnTrainArgs<T> a{d,
                         x.data(),
                         y.data(),
                         gamma.data(),
                         beta.data(),
                         o.running_mean.data(),
                         o.running_var.data(),
                         o.save_mean.data(),
                         o.save_invstd.data(),
                         0.1f,
                         1e-5f,
                         relu};
  for (int64_t ch = 0; ch < d.c; ++ch) bn_loops<T>(isa).train(a, ch);
  return o;
}

template <typename T>
class CpuIsaLoops : public ::testing::Test {};
using StoredTypes = ::testing::Types<float, F16, BF16>;
TYPED_TEST_SUITE(CpuIsaLoops, StoredTypes);

TYPED_TEST(CpuIsaLoops, BatchNormTrainsAndRunsBackwardWithTheSameBitsOnEitherInstructionSet) {
  using T = TypeParam;
  if (host_cpu_isa() != CpuIsa::kAvx512) GTEST_SKIP() << "this CPU runs the x86-64 loops only";
  for (const int64_t inner : {1, 3, 4, 8, 15, 16, 33, 256}) {
    for (const bool relu : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "inner " << inner << (relu ? ", with ReLU" : ""));
      const BnDims d{3, 5, inner};
      const size_t n = static_cast<size_t>(d.n * d.c * d.inner);
      const std::vector<T> x = stored_values<T>(batch(d, 1 + static_cast<uint32_t>(inner)));
      const std::vector<T> dy = stored_values<T>(batch(d, 99));
      const std::vector<float> gamma = hard_values(5, 7), beta = hard_values(5, 8);
      std::vector<T> y[2] = {std::vector<T>(n), std::vector<T>(n)};
      std::vector<T> dx[2] = {std::vector<T>(n), std::vector<T>(n)};
      std::vector<float> dgamma[2] = {std::vector<float>(5), std::vector<float>(5)};
      std::vector<float> dbeta[2] = {std::vector<float>(5), std::vector<float>(5)};
      TrainOut stats[2];
      const CpuIsa isas[2] = {CpuIsa::kX86_64, CpuIsa::kAvx512};
      for (int k = 0; k < 2; ++k) {
        stats[k] = train<T>(isas[k], d, x, y[k], relu, gamma, beta);
        const BnBackwardArgs<T> a{d,
                                  x.data(),
                                  relu ? y[k].data() : nullptr,
                                  dy.data(),
                                  dx[k].data(),
                                  gamma.data(),
                                  stats[k].save_mean.data(),
                                  stats[k].save_invstd.data(),
                                  dgamma[k].data(),
                                  dbeta[k].data()};
        for (int64_t ch = 0; ch < d.c; ++ch) bn_loops<T>(isas[k]).backward(a, ch);
      }
      EXPECT_TRUE(same_bits(y[0], y[1]));
      EXPECT_TRUE(same_bits(stats[0].running_mean, stats[1].running_mean));
      EXPECT_TRUE(same_bits(stats[0].running_var, stats[1].running_var));
      EXPECT_TRUE(same_bits(stats[0].save_mean, stats[1].save_mean));
      EXPECT_TRUE(same_bits(stats[0].save_invstd, stats[1].save_invstd));
      EXPECT_TRUE(same_bits(dx[0], dx[1]));
      EXPECT_TRUE(same_bits(dgamma[0], dgamma[1]));
      EXPECT_TRUE(same_bits(dbeta[0], dbeta[1]));
      EXPECT_TRUE(std::isfinite(load(dx[0][n - 1])));  // the last channel's outputs are numbers
      std::vector<T> inferred[2] = {std::vector<T>(n), std::vector<T>(n)};
      for (int k = 0; k < 2; ++k) {
        const BnInferArgs<T> a{d,
                               x.data(),
                               inferred[k].data(),
                               gamma.data(),
                               beta.data(),
                               stats[0].running_mean.data(),
                               stats[0].running_var.data(),
                               1e-5f};
        for (int64_t ch = 0; ch < d.c; ++ch) bn_loops<T>(isas[k]).infer(a, ch);
      }
      EXPECT_TRUE(same_bits(inferred[0], inferred[1]));
    }
  }
}

TYPED_TEST(CpuIsaLoops, ElementwiseLoopsGiveTheSameBitsOnEitherInstructionSet) {
  using T = TypeParam;
  if (host_cpu_isa() != CpuIsa::kAvx512) GTEST_SKIP() << "this CPU runs the x86-64 loops only";
  const CpuIsa isas[2] = {CpuIsa::kX86_64, CpuIsa::kAvx512};
  for (const int64_t n : {1, 15, 16, 17, 1000, 4099}) {
    SCOPED_TRACE(::testing::Message() << n << " elements");
    const BnDims one_channel{1, 1, n};
    const std::vector<float> wide = batch(one_channel, 3);  // non-finite values at the front
    const std::vector<T> a = stored_values<T>(wide), b = stored_values<T>(batch(one_channel, 4));
    const size_t count = static_cast<size_t>(n);
    std::vector<T> sum[2], relu[2], grad[2], narrowed[2];
    std::vector<float> widened[2];
    for (int k = 0; k < 2; ++k) {
      const PointwiseLoops<T>& loops = pointwise_loops<T>(isas[k]);
      sum[k] = relu[k] = grad[k] = narrowed[k] = std::vector<T>(count);
      widened[k] = std::vector<float>(count);
      loops.sum(a.data(), b.data(), sum[k].data(), n);
      loops.relu(a.data(), relu[k].data(), n);
      loops.relu_grad(a.data(), b.data(), grad[k].data(), n);
      loops.widen(a.data(), widened[k].data(), n);
      loops.narrow(wide.data(), narrowed[k].data(), n);
    }
    EXPECT_TRUE(same_bits(sum[0], sum[1]));
    EXPECT_TRUE(same_bits(relu[0], relu[1]));
    EXPECT_TRUE(same_bits(grad[0], grad[1]));
    EXPECT_TRUE(same_bits(widened[0], widened[1]));
    EXPECT_TRUE(same_bits(narrowed[0], narrowed[1]));
  }
}

// Max pooling's channels-last window scan finds the same pixel for every channel: on windows
// full of ties (the first maximum wins), signed zeros, -infinity and NaN (the last one wins),
// clipped by the image's edges.
TYPED_TEST(CpuIsaLoops, WindowArgmaxFindsTheSamePixelsOnEitherInstructionSet) {
  using T = TypeParam;
  if (host_cpu_isa() != CpuIsa::kAvx512) GTEST_SKIP() << "this CPU runs the x86-64 loops only";
  const float values[] = {-std::numeric_limits<float>::infinity(), -0.f, 0.f, 1.f, 1.f, 2.f,
                          std::numeric_limits<float>::quiet_NaN()};
  std::mt19937 gen(5);
  const int64_t side = 5;
  for (const int64_t c : {1, 15, 16, 17, 64}) {
    SCOPED_TRACE(::testing::Message() << c << " channels");
    std::vector<float> v(static_cast<size_t>(side * side * c));
    for (float& x : v) x = values[gen() % std::size(values)];
    const std::vector<T> x = stored_values<T>(v);
    for (const auto [ha, hb, wa, wb] :
         {std::array<int64_t, 4>{0, 3, 0, 3}, {1, 4, 2, 5}, {4, 5, 0, 2}, {0, 5, 0, 5}}) {
      std::vector<int32_t> arg[2];
      for (int k = 0; k < 2; ++k) {
        std::vector<float> best(static_cast<size_t>(c));
        std::vector<int32_t> last_nan(static_cast<size_t>(c));
        arg[k].assign(static_cast<size_t>(c), -7);
        pool_loops<T>(k ? CpuIsa::kAvx512 : CpuIsa::kX86_64)
            .window_argmax(x.data(), side, c, ha, hb, wa, wb, arg[k].data(), best.data(),
                           last_nan.data());
      }
      EXPECT_EQ(arg[0], arg[1]) << "rows " << ha << ".." << hb << ", columns " << wa << ".." << wb;
      for (int32_t at : arg[0]) {
        EXPECT_TRUE(at / side >= ha && at / side < hb && at % side >= wa && at % side < wb) << at;
      }
    }
  }
}

// The update, plain (f32 gradients) and with the compute copy (16-bit gradients of type T), with
// and without a loss scale's factor.
TYPED_TEST(CpuIsaLoops, SgdUpdatesGiveTheSameBitsOnEitherInstructionSet) {
  using T = TypeParam;
  if (host_cpu_isa() != CpuIsa::kAvx512) GTEST_SKIP() << "this CPU runs the x86-64 loops only";
  const CpuIsa isas[2] = {CpuIsa::kX86_64, CpuIsa::kAvx512};
  const BnDims d{1, 1, 3001};  // three chunks of the copy's widening, the last one short
  const std::vector<float> g = batch(d, 5), w = hard_values(3001, 6), m = hard_values(3001, 7);
  for (const float factor : {1.f, 1.f / 1024}) {
    SCOPED_TRACE(::testing::Message() << "gradient factor " << factor);
    const SgdStep step{0.05f, 0.9f, 1e-4f, factor};
    std::vector<float> p[2] = {w, w}, buf[2] = {m, m};
    std::vector<T> compute[2] = {std::vector<T>(w.size()), std::vector<T>(w.size())};
    for (int k = 0; k < 2; ++k) {
      if constexpr (std::is_same_v<T, float>) {
        sgd_loops(isas[k]).update(step, g.data(), buf[k].data(), p[k].data(), d.inner);
      } else {
        const std::vector<T> g16 = stored_values<T>(g);
        sgd_copy_loops<T, T>(isas[k]).update(step, g16.data(), buf[k].data(), p[k].data(),
                                             compute[k].data(), d.inner);
      }
    }
    EXPECT_TRUE(same_bits(p[0], p[1]));
    EXPECT_TRUE(same_bits(buf[0], buf[1]));
    EXPECT_TRUE(same_bits(compute[0], compute[1]));
    EXPECT_TRUE(std::isfinite(p[0].back()));
  }
}

// The update into a compute copy kept in pairs (Layout::kOIhw8i16o2i) computes the element-wise
// update's values and stores them where runtime/core/layout_order.h says, on either instruction
// set, split into whole blocks anywhere.
template <typename T>
class CpuIsaSixteenBitLoops : public ::testing::Test {};
using SixteenBitTypes = ::testing::Types<F16, BF16>;
TYPED_TEST_SUITE(CpuIsaSixteenBitLoops, SixteenBitTypes);

TYPED_TEST(CpuIsaSixteenBitLoops, SgdIntoPairsStoresTheElementwiseCopyInPairs) {
  using T = TypeParam;
  const Shape shape{32, 48, 3, 1};  // 18 blocks of 16 x 16: five chunks of 4, the last short
  const int64_t n = shape.numel(), blocks = n / 256;
  const std::vector<float> g = hard_values(static_cast<size_t>(n), 5),
                           w = hard_values(static_cast<size_t>(n), 6),
                           m = hard_values(static_cast<size_t>(n), 7);
  const std::vector<T> g16 = stored_values<T>(g);
  const SgdStep step{0.05f, 0.9f, 1e-4f, 1.f / 512};
  std::vector<float> p = w, buf = m;
  std::vector<T> flat(static_cast<size_t>(n));
  sgd_copy_loops<T, T>(CpuIsa::kX86_64)
      .update(step, g16.data(), buf.data(), p.data(), flat.data(), n);
  // The element-wise copy is in p's order, kOIhw16i16o: where kOIhw8i16o2i keeps each element.
  std::vector<uint8_t> bytes(flat.size() * sizeof(T));
  std::memcpy(bytes.data(), flat.data(), bytes.size());
  bytes = to_stored_order(Layout::kOIhw8i16o2i, shape, sizeof(T),
                          to_logical_order(Layout::kOIhw16i16o, shape, sizeof(T), bytes));
  std::vector<T> expected(flat.size());
  std::memcpy(expected.data(), bytes.data(), bytes.size());
  for (const CpuIsa isa : {CpuIsa::kX86_64, host_cpu_isa()}) {
    for (const int64_t split : {int64_t{0}, int64_t{5}}) {
      std::vector<float> p2 = w, buf2 = m;
      std::vector<T> paired(flat.size());
      const auto update = sgd_copy_loops<T, T>(isa).update_into_pairs;
      update(step, g16.data(), buf2.data(), p2.data(), paired.data(), split);
      const size_t at = static_cast<size_t>(split * 256);
      update(step, g16.data() + at, buf2.data() + at, p2.data() + at, paired.data() + at,
             blocks - split);
      EXPECT_TRUE(same_bits(paired, expected)) << cpu_isa_name(isa) << ", split " << split;
      EXPECT_TRUE(same_bits(p2, p));
      EXPECT_TRUE(same_bits(buf2, buf));
    }
    // The updated weights rounded into pairs alone, as cast does.
    std::vector<T> narrowed(flat.size());
    pointwise_loops<T>(isa).narrow_into_pairs(p.data(), narrowed.data(), blocks);
    EXPECT_TRUE(same_bits(narrowed, expected)) << cpu_isa_name(isa);
  }
}

// The update from gradients of one 16-bit type into a copy of the other.
template <typename G, typename C>
void expect_mixed_update_the_same_on_either_instruction_set() {
  const std::vector<float> g = hard_values(3001, 8), w = hard_values(3001, 9),
                           m = hard_values(3001, 10);
  const std::vector<G> g16 = stored_values<G>(g);
  const SgdStep step{0.05f, 0.9f, 1e-4f, 1.f};
  std::vector<float> p[2] = {w, w}, buf[2] = {m, m};
  std::vector<C> compute[2] = {std::vector<C>(w.size()), std::vector<C>(w.size())};
  const CpuIsa isas[2] = {CpuIsa::kX86_64, CpuIsa::kAvx512};
  for (int k = 0; k < 2; ++k) {
    sgd_copy_loops<G, C>(isas[k]).update(step, g16.data(), buf[k].data(), p[k].data(),
                                         compute[k].data(), 3001);
  }
  EXPECT_TRUE(same_bits(compute[0], compute[1]));
  EXPECT_TRUE(same_bits(p[0], p[1]));
  EXPECT_TRUE(same_bits(buf[0], buf[1]));
}

TEST(CpuIsaMixedLoops, SgdFromOneSixteenBitTypeIntoTheOtherGivesTheSameBits) {
  if (host_cpu_isa() != CpuIsa::kAvx512) GTEST_SKIP() << "this CPU runs the x86-64 loops only";
  expect_mixed_update_the_same_on_either_instruction_set<F16, BF16>();
  expect_mixed_update_the_same_on_either_instruction_set<BF16, F16>();
}

TEST(CpuIsaMixedLoops, TheLoopsOfAnInstructionSetThisCpuLacksAreRefused) {
  if (host_cpu_isa() == CpuIsa::kAvx512) {
    EXPECT_NO_THROW(pointwise_loops<float>(CpuIsa::kAvx512));
  } else {
    EXPECT_THROW(pointwise_loops<float>(CpuIsa::kAvx512), Unsupported);
    EXPECT_THROW(bn_loops<BF16>(CpuIsa::kAvx512), Unsupported);
  }
  EXPECT_NO_THROW(sgd_loops(CpuIsa::kX86_64));
}

}  // namespace
}  // namespace dlb
