// The CUDA backend's own kernels, checked here without a GPU: each kernel's functor
// (runtime/backend/cuda/*_kernels.h) runs on the host over every index, and its output must equal
// the CPU backend's, bit for bit. The functor and the CPU op do the same float and double
// operations in the same order, and here both are compiled by the same host compiler, so equality
// is the arithmetic's own expectation. (On a GPU, nvcc may fuse multiply-adds and its exp/log
// differ in the last bit: the gpu-labelled tests compare with tolerances for that.) The grid of
// the grid-stride loop is checked to visit every index exactly once.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cuda/batch_norm_kernels.h"
#include "runtime/backend/cuda/bias_kernels.h"
#include "runtime/backend/cuda/elementwise_kernels.h"
#include "runtime/backend/cuda/launch.h"
#include "runtime/backend/cuda/loss_kernels.h"
#include "runtime/backend/cuda/optimizer_kernels.h"
#include "runtime/backend/cuda/pooling_kernels.h"
#include "runtime/core/rng.h"

namespace dlb::cuda {
namespace {

// What the GPU does with a functor, run on the host: every index of [0, n), once.
template <typename F>
void run_on_host(int64_t n, const F& f) {
  for (int64_t i = 0; i < n; ++i) f(i);
}

class KernelMath : public ::testing::Test {
 protected:
  Tensor random(const Shape& s, float lo = -2.f, float hi = 2.f) {
    std::vector<float> v(s.numel());
    for (float& x : v) x = rng.uniform(lo, hi);
    Tensor t = cpu.empty(s, DType::kF32, MemCategory::kActivations, "t");
    cpu.copy_from_host(v.data(), t);
    return t;
  }
  Tensor zeros(const Shape& s) {
    Tensor t = cpu.empty(s, DType::kF32, MemCategory::kActivations, "t");
    cpu.fill(t, 0.f);
    return t;
  }
  Tensor copy_of(const Tensor& t) {
    Tensor c = zeros(t.shape());
    cpu.copy(t, c);
    return c;
  }
  static std::vector<float> values(const Tensor& t) {
    return {t.data<float>(), t.data<float>() + t.numel()};
  }
  // Bit patterns: equal where values() is not, for NaN.
  static std::vector<uint32_t> bits(const Tensor& t) {
    std::vector<uint32_t> b(static_cast<size_t>(t.numel()));
    std::memcpy(b.data(), t.data<float>(), b.size() * 4);
    return b;
  }
  CpuBackend cpu{{}};
  Rng rng{7};
};

// Shapes with odd sizes, so no index pattern hides behind a power of two.
const Shape kShape{3, 5, 7, 9};

TEST_F(KernelMath, ReluForwardAndBackward) {
  Tensor x = random(kShape);
  const Tensor dy = random(kShape);
  x.data<float>()[5] = NAN;  // propagates both ways, as on the CPU
  x.data<float>()[6] = -0.f;
  Tensor y_ref = zeros(kShape), y = zeros(kShape), dx_ref = zeros(kShape), dx = zeros(kShape);
  cpu.relu_forward(x, y_ref);
  run_on_host(x.numel(), ReluForward<float>{x.data<float>(), y.data<float>()});
  EXPECT_EQ(bits(y), bits(y_ref));
  cpu.relu_backward(y_ref, dy, dx_ref);
  run_on_host(x.numel(),
              ReluBackward<float>{y_ref.data<float>(), dy.data<float>(), dx.data<float>()});
  EXPECT_EQ(bits(dx), bits(dx_ref));
}

TEST_F(KernelMath, AddAndAccumulate) {
  const Tensor a = random(kShape), b = random(kShape);
  Tensor y_ref = zeros(kShape), y = zeros(kShape);
  cpu.add(a, b, y_ref);
  run_on_host(a.numel(), Add<float>{a.data<float>(), b.data<float>(), y.data<float>()});
  EXPECT_EQ(values(y), values(y_ref));
  Tensor acc_ref = copy_of(b), acc = copy_of(b);
  cpu.accumulate(a, acc_ref);
  run_on_host(a.numel(), Accumulate<float>{a.data<float>(), acc.data<float>()});
  EXPECT_EQ(values(acc), values(acc_ref));
}

TEST_F(KernelMath, DropoutDrawsTheCpuBackendsMask) {
  const Shape s{4, 25000};
  const Tensor x = random(s), dy = random(s);
  const float p = 0.4f;
  Tensor mask_ref = zeros(s), y_ref = zeros(s), mask = zeros(s), y = zeros(s);
  cpu.dropout_forward(x, p, 1234, mask_ref, y_ref);
  run_on_host(x.numel(), DropoutForward<float>{x.data<float>(), p, 1234, nullptr,
                                               mask.data<float>(), y.data<float>()});
  EXPECT_EQ(values(mask), values(mask_ref));
  EXPECT_EQ(values(y), values(y_ref));
  // The fraction dropped is p within 5 standard deviations of a binomial(n, p).
  int64_t dropped = 0;
  for (float m : values(mask)) dropped += m == 0.f;
  const double n = static_cast<double>(x.numel());
  EXPECT_NEAR(static_cast<double>(dropped) / n, p, 5 * std::sqrt(p * (1 - p) / n));
  Tensor dx_ref = zeros(s), dx = zeros(s);
  cpu.dropout_backward(dy, mask_ref, dx_ref);
  run_on_host(x.numel(),
              DropoutBackward<float>{dy.data<float>(), mask.data<float>(), dx.data<float>()});
  EXPECT_EQ(values(dx), values(dx_ref));
}

TEST_F(KernelMath, DropoutMasksDifferBetweenSeeds) {
  const Shape s{1000};
  const Tensor x = random(s);
  Tensor m1 = zeros(s), m2 = zeros(s), y = zeros(s);
  run_on_host(1000, DropoutForward<float>{x.data<float>(), 0.5f, 1, nullptr, m1.data<float>(),
                                          y.data<float>()});
  run_on_host(1000, DropoutForward<float>{x.data<float>(), 0.5f, 2, nullptr, m2.data<float>(),
                                          y.data<float>()});
  EXPECT_NE(values(m1), values(m2));
}

// A replayed graph cannot change a kernel's arguments: the mask's seed is the base plus the step
// counter read from memory, as on the CPU, and the counter's advance is a kernel of its own.
TEST_F(KernelMath, DropoutSeedsFromTheStepCounterInMemory) {
  const Shape s{3000};
  const Tensor x = random(s);
  Tensor step = cpu.empty({1}, DType::kI64, MemCategory::kOptimizerState, "step");
  step.data<int64_t>()[0] = 6;
  run_on_host(1, Increment{step.data<int64_t>()});
  ASSERT_EQ(step.data<int64_t>()[0], 7);
  Tensor cpu_step = cpu.empty({1}, DType::kI64, MemCategory::kOptimizerState, "step");
  cpu_step.data<int64_t>()[0] = 6;
  cpu.increment(cpu_step);
  ASSERT_EQ(cpu_step.data<int64_t>()[0], 7);

  Tensor m_ref = zeros(s), y_ref = zeros(s), m = zeros(s), y = zeros(s), m_plain = zeros(s);
  cpu.dropout_forward(x, 0.3f, DropoutSeed{1000, &cpu_step}, m_ref, y_ref);
  run_on_host(x.numel(), DropoutForward<float>{x.data<float>(), 0.3f, 1000, step.data<int64_t>(),
                                               m.data<float>(), y.data<float>()});
  EXPECT_EQ(values(m), values(m_ref));
  EXPECT_EQ(values(y), values(y_ref));
  // The same draws as a plain seed of base + step, and other draws after the next advance.
  run_on_host(x.numel(), DropoutForward<float>{x.data<float>(), 0.3f, 1007, nullptr,
                                               m_plain.data<float>(), y.data<float>()});
  EXPECT_EQ(values(m_plain), values(m_ref));
  run_on_host(1, Increment{step.data<int64_t>()});
  run_on_host(x.numel(), DropoutForward<float>{x.data<float>(), 0.3f, 1000, step.data<int64_t>(),
                                               m.data<float>(), y.data<float>()});
  EXPECT_NE(values(m), values(m_ref));
}

TEST_F(KernelMath, SgdUpdateWithMomentumAndWeightDecay) {
  const Shape s{1001};
  const Tensor grad = random(s);
  const Tensor buf0 = random(s), param0 = random(s);
  const SgdConfig cfg{0.05f, 0.9f, 1e-3f};
  Tensor buf_ref = copy_of(buf0), param_ref = copy_of(param0);
  Tensor buf = copy_of(buf0), param = copy_of(param0);
  for (int step = 0; step < 3; ++step) {
    cpu.sgd_update(cfg, grad, buf_ref, param_ref);
    run_on_host(
        1001,
        SgdUpdate<float>{
            cfg, grad.data<float>(), nullptr, buf.data<float>(), param.data<float>(), nullptr, {}});
  }
  EXPECT_EQ(values(buf), values(buf_ref));
  EXPECT_EQ(values(param), values(param_ref));
}

TEST_F(KernelMath, SoftmaxCrossEntropyForwardAndBackward) {
  const int64_t rows = 13, classes = 1000;  // imagenet's classes, a batch that is not a multiple
  const Tensor logits = random({rows, classes}, -20.f, 20.f);
  Tensor labels = cpu.empty({rows}, DType::kI64, MemCategory::kData, "labels");
  for (int64_t r = 0; r < rows; ++r) labels.data<int64_t>()[r] = rng.below(classes);
  Tensor probs_ref = zeros({rows, classes}), loss_ref = zeros({1});
  cpu.softmax_cross_entropy(logits, labels, probs_ref, loss_ref);
  Tensor probs = zeros({rows, classes}), loss = zeros({1});
  softmax_cross_entropy_on_host(logits.data<float>(), labels.data<int64_t>(), rows, classes,
                                probs.data<float>(), loss.data<float>());
  // The maxima are the CPU's; the double sums are grouped by the blocks' trees: equal, or one
  // float rounding apart where a sum's last bits decide the rounding.
  for (int64_t i = 0; i < rows * classes; ++i) {
    const float want = probs_ref.data<float>()[i];
    ASSERT_LE(std::fabs(probs.data<float>()[i] - want), FLT_EPSILON * std::fabs(want)) << i;
  }
  EXPECT_LE(std::fabs(loss.data<float>()[0] - loss_ref.data<float>()[0]),
            FLT_EPSILON * std::fabs(loss_ref.data<float>()[0]));

  Tensor d_ref = zeros({rows, classes}), d = zeros({rows, classes});
  cpu.softmax_cross_entropy_backward(probs_ref, labels, d_ref);
  run_on_host(rows * classes,
              SoftmaxCrossEntropyBackward<float>{probs.data<float>(), labels.data<int64_t>(),
                                                 nullptr, rows, classes, d.data<float>()});
  EXPECT_EQ(values(d), values(d_ref));
}

TEST_F(KernelMath, SoftmaxCrossEntropyMarksALabelOutOfRangeAsNaN) {
  const Tensor logits = random({2, 3});
  const int64_t good[] = {1, 2}, bad[] = {1, 3};
  std::vector<float> probs(6);
  float loss = 0;
  softmax_cross_entropy_on_host(logits.data<float>(), good, 2, 3, probs.data(), &loss);
  EXPECT_TRUE(std::isfinite(loss));
  softmax_cross_entropy_on_host(logits.data<float>(), bad, 2, 3, probs.data(), &loss);
  EXPECT_TRUE(std::isnan(loss));
}

// Shrinking (overlapping bins), growing (repeated inputs), and the 1x1 global pool.
struct PoolCase {
  const char* name;
  int64_t h, w, oh, ow;
};
void PrintTo(const PoolCase& c, std::ostream* os) {
  *os << c.name << " " << c.h << "x" << c.w << " -> " << c.oh << "x" << c.ow;
}

class AdaptivePoolMath : public KernelMath, public ::testing::WithParamInterface<PoolCase> {};

TEST_P(AdaptivePoolMath, ForwardAndBackwardOverEveryIndex) {
  const PoolCase c = GetParam();
  const Shape in{2, 3, c.h, c.w}, out{2, 3, c.oh, c.ow};
  const Tensor x = random(in), dy = random(out);
  Tensor y_ref = zeros(out), y = zeros(out), dx_ref = zeros(in), dx = zeros(in);
  cpu.adaptive_avg_pool_forward(x, y_ref);
  run_on_host(y.numel(),
              AdaptiveAvgPoolForward<float>{x.data<float>(), Nchw{3, c.h, c.w, false},
                                            Nchw{3, c.oh, c.ow, false}, y.data<float>()});
  EXPECT_EQ(values(y), values(y_ref));
  cpu.adaptive_avg_pool_backward(dy, dx_ref);
  run_on_host(dx.numel(),
              AdaptiveAvgPoolBackward<float>{dy.data<float>(), Nchw{3, c.h, c.w, false},
                                             Nchw{3, c.oh, c.ow, false}, dx.data<float>()});
  EXPECT_EQ(values(dx), values(dx_ref));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AdaptivePoolMath,
    ::testing::Values(PoolCase{"shrink", 7, 5, 3, 2}, PoolCase{"grow", 3, 2, 7, 7},
                      PoolCase{"global", 6, 6, 1, 1}, PoolCase{"resnet_224", 7, 7, 1, 1},
                      PoolCase{"vgg_32", 1, 1, 7, 7}, PoolCase{"alexnet_63", 1, 1, 6, 6},
                      PoolCase{"uneven", 13, 11, 6, 4}),
    [](const auto& info) { return std::string(info.param.name); });

// Max and average pooling as the reference models use them (and the odd cases around them).
struct WindowCase {
  const char* name;
  PoolDesc desc;
  int64_t h, w;
};
void PrintTo(const WindowCase& c, std::ostream* os) { *os << c.name; }

class WindowPoolMath : public KernelMath, public ::testing::WithParamInterface<WindowCase> {};

TEST_P(WindowPoolMath, ForwardAndBackwardOverEveryIndex) {
  const WindowCase c = GetParam();
  const PoolDesc& p = c.desc;
  const int64_t oh = (c.h + 2 * p.pad_h - p.kernel_h) / p.stride_h + 1;
  const int64_t ow = (c.w + 2 * p.pad_w - p.kernel_w) / p.stride_w + 1;
  const Shape in{2, 3, c.h, c.w}, out{2, 3, oh, ow};
  // Values from a few levels, so that windows hold ties and the first maximum matters, and a
  // few NaNs, which take their windows.
  Tensor x = zeros(in);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int level = static_cast<int>(rng.uniform(0.f, 4.2f));
    x.data<float>()[i] = level == 4 ? NAN : static_cast<float>(level);
  }
  const Tensor dy = random(out);
  Tensor y_ref = zeros(out), y = zeros(out), dx_ref = zeros(in), dx = zeros(in);
  cpu.pool_forward(p, x, y_ref);
  run_on_host(y.numel(), PoolForward<float>{p, x.data<float>(), Nchw{3, c.h, c.w, false},
                                            Nchw{3, oh, ow, false}, y.data<float>()});
  EXPECT_EQ(bits(y), bits(y_ref));
  cpu.pool_backward(p, x, y_ref, dy, dx_ref);
  run_on_host(dx.numel(),
              PoolBackward<float>{p, x.data<float>(), dy.data<float>(), Nchw{3, c.h, c.w, false},
                                  Nchw{3, oh, ow, false}, dx.data<float>()});
  EXPECT_EQ(bits(dx), bits(dx_ref));
}

PoolDesc pool(PoolMode m, int64_t k, int64_t s, int64_t pad, bool include_pad = true) {
  PoolDesc p;
  p.mode = m;
  p.kernel_h = p.kernel_w = k;
  p.stride_h = p.stride_w = s;
  p.pad_h = p.pad_w = pad;
  p.count_include_pad = include_pad;
  return p;
}

INSTANTIATE_TEST_SUITE_P(
    Windows, WindowPoolMath,
    ::testing::Values(WindowCase{"resnet_max_3s2p1", pool(PoolMode::kMax, 3, 2, 1), 16, 15},
                      WindowCase{"alexnet_max_3s2", pool(PoolMode::kMax, 3, 2, 0), 15, 13},
                      WindowCase{"vgg_max_2s2", pool(PoolMode::kMax, 2, 2, 0), 8, 9},
                      WindowCase{"max_overlapping_5s1p2", pool(PoolMode::kMax, 5, 1, 2), 7, 6},
                      WindowCase{"avg_3s2p1", pool(PoolMode::kAvg, 3, 2, 1), 9, 10},
                      WindowCase{"avg_3s2p1_exclude_pad", pool(PoolMode::kAvg, 3, 2, 1, false), 9,
                                 10},
                      WindowCase{"avg_2s2", pool(PoolMode::kAvg, 2, 2, 0), 7, 8}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_F(KernelMath, BiasAddAndItsGradient) {
  const Tensor b = random(Shape{5}), dy = random(kShape);
  Tensor y_ref = random(kShape);
  Tensor y = copy_of(y_ref);
  cpu.bias_add(b, y_ref);
  const int64_t inner = 7 * 9;
  run_on_host(y.numel(),
              BiasAdd<float>{b.data<float>(), ChannelRows{5, inner, false}, y.data<float>()});
  EXPECT_EQ(values(y), values(y_ref));

  Tensor db_ref = zeros(Shape{5});
  cpu.bias_backward(dy, db_ref);
  // Any number of partial sums per row (one, some, more than a row's values): every value is
  // summed once. Both sides sum 189 floats of magnitude <= 2 in double, in different groupings:
  // the difference is at most a few double roundings (~1e-13), so the floats agree unless one
  // straddles a float rounding boundary, where they differ by one float ulp.
  for (int64_t lanes : {int64_t{1}, int64_t{4}, int64_t{7}, inner + 3}) {
    Tensor db = zeros(Shape{5});
    std::vector<double> partials(3 * 5 * lanes), rows(3 * 5);
    run_on_host(3 * 5 * lanes,
                BiasPartialSums<float>{dy.data<float>(), ChannelRows{5, inner, false}, lanes,
                                       partials.data()});
    run_on_host(3 * 5, BiasLaneSum{partials.data(), 5, lanes, rows.data()});
    run_on_host(5, BiasChannelSum<float>{rows.data(), 3, 5, db.data<float>()});
    for (int64_t c = 0; c < 5; ++c) {
      EXPECT_NEAR(db.data<float>()[c], db_ref.data<float>()[c],
                  std::nextafter(std::fabs(db_ref.data<float>()[c]), INFINITY) -
                      std::fabs(db_ref.data<float>()[c]))
          << "channel " << c << ", " << lanes << " lanes";
    }
  }
  // A VGG-sized row gets many lanes, and the partials stay within 2^22 (32 MiB of doubles).
  EXPECT_EQ(bias_lanes(64, 64, 224 * 224), 256);
  EXPECT_EQ(bias_lanes(2, 5, 63), 1);
  EXPECT_LE(256 * 512 * bias_lanes(256, 512, 224 * 224), int64_t{1} << 22);
  EXPECT_GE(bias_lanes(256, 512, 224 * 224), 1);
}

TEST_F(KernelMath, BatchNormRunningStatisticsAreTorchs) {
  // The CPU backend's training pass computes the running statistics from the batch directly;
  // the kernel recovers the batch variance from the saved 1/sqrt(var + eps), a float: var + eps
  // comes back within 2 float roundings (1.2e-7 relative; var ~ 5 here, so eps changes nothing).
  // Blended with momentum 0.1 that is 1.2e-8 of the result, plus each side's final rounding to
  // float (one ulp apart at most, 1.2e-7): 3e-7 relative bounds the difference.
  const Shape s{4, 6, 5, 3};
  const Tensor x = random(s, -3.f, 5.f), gamma = random(Shape{6}), beta = random(Shape{6});
  Tensor rm_ref = random(Shape{6}, 0.f, 1.f), rv_ref = random(Shape{6}, 0.5f, 2.f);
  Tensor rm = copy_of(rm_ref), rv = copy_of(rv_ref);
  Tensor mean = zeros(Shape{6}), invstd = zeros(Shape{6}), y = zeros(s);
  const float momentum = 0.1f, eps = 1e-5f;
  cpu.batch_norm_train(x, gamma, beta, rm_ref, rv_ref, mean, invstd, y, momentum, eps);
  // num_batches_tracked advances once per pass, whatever the channels (channel 0's index).
  int64_t count = 41;
  run_on_host(6, BatchNormRunningUpdate{mean.data<float>(), invstd.data<float>(), eps, momentum,
                                        4 * 5 * 3, rm.data<float>(), rv.data<float>(), &count});
  EXPECT_EQ(count, 42);
  for (int64_t c = 0; c < 6; ++c) {
    EXPECT_FLOAT_EQ(rm.data<float>()[c], rm_ref.data<float>()[c]) << "channel " << c;
    EXPECT_NEAR(rv.data<float>()[c], rv_ref.data<float>()[c], 3e-7 * rv_ref.data<float>()[c])
        << "channel " << c;
  }
}

// A recomputed batch norm (--recompute) trains with momentum 0: running = 1 * running + 0 *
// batch is the running statistic exactly, in double and back to float, on the CPU backend and
// in the CUDA kernel alike, so that recomputing leaves them bit for bit.
TEST_F(KernelMath, BatchNormRunningStatisticsStayBitForBitWithMomentumZero) {
  const Shape s{4, 6, 5, 3};
  const Tensor x = random(s, -3.f, 5.f), gamma = random(Shape{6}), beta = random(Shape{6});
  const Tensor rm0 = random(Shape{6}, 0.f, 1.f), rv0 = random(Shape{6}, 0.5f, 2.f);
  Tensor rm_cpu = copy_of(rm0), rv_cpu = copy_of(rv0), rm = copy_of(rm0), rv = copy_of(rv0);
  Tensor mean = zeros(Shape{6}), invstd = zeros(Shape{6}), y = zeros(s);
  cpu.batch_norm_train(x, gamma, beta, rm_cpu, rv_cpu, mean, invstd, y, 0.f, 1e-5f);
  run_on_host(6, BatchNormRunningUpdate{mean.data<float>(), invstd.data<float>(), 1e-5, 0.0,
                                        4 * 5 * 3, rm.data<float>(), rv.data<float>()});
  for (const Tensor* t : {&rm_cpu, &rm}) {
    EXPECT_EQ(std::memcmp(t->data<float>(), rm0.data<float>(), 6 * sizeof(float)), 0);
  }
  for (const Tensor* t : {&rv_cpu, &rv}) {
    EXPECT_EQ(std::memcmp(t->data<float>(), rv0.data<float>(), 6 * sizeof(float)), 0);
  }
}

TEST_F(KernelMath, BatchNormKernelsAreTheCpuBackends) {
  // Training, forward and backward: the fallback where cuDNN has no engine. Both sides work in
  // double, differently (Welford over a block's threads and parts here; two sums there): the
  // statistics agree to double rounding, so float outputs are equal or one float rounding apart
  // (of the output's scale, through the float scale and shift).
  const Shape s{4, 6, 5, 3}, c{6};
  const int64_t n = 4, channels = 6, inner = 15, m = n * inner;
  int64_t count = 7;  // num_batches_tracked
  const ChannelRows layout{channels, inner, false};
  const Tensor x = random(s, -3.f, 5.f), gamma = random(c), beta = random(c), dy = random(s);
  Tensor rm_ref = random(c, 0.f, 1.f), rv_ref = random(c, 0.5f, 2.f);
  Tensor rm = copy_of(rm_ref), rv = copy_of(rv_ref), mean_ref = zeros(c), inv_ref = zeros(c);
  Tensor y_ref = zeros(s), mean = zeros(c), inv = zeros(c), y = zeros(s);
  cpu.batch_norm_train(x, gamma, beta, rm_ref, rv_ref, mean_ref, inv_ref, y_ref, 0.1f, 1e-5f);
  // Three parts per channel (a large N * H * W's split), merged in order by BatchNormStatistics.
  const int64_t parts = 3;
  std::vector<Welford> moments(channels * parts);
  std::vector<SumPair> sums(channels * parts);
  std::vector<double> channel(4 * channels);
  reduce_channels_on_host(BatchNormMoments<float>{x.data<float>(), layout}, channels, m, parts,
                          moments.data());
  run_on_host(channels,
              BatchNormStatistics{moments.data(), parts, gamma.data<float>(), beta.data<float>(),
                                  1e-5f, 0.1f, channel.data(), mean.data<float>(),
                                  inv.data<float>(), rm.data<float>(), rv.data<float>(), &count});
  EXPECT_EQ(count, 8);
  run_on_host(x.numel(),
              BatchNormNormalize<float>{x.data<float>(), channel.data(), layout, y.data<float>()});
  auto close = [](const Tensor& got, const Tensor& want, const char* what) {
    double scale = 0, worst = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      scale = std::max(scale, std::fabs(static_cast<double>(want.data<float>()[i])));
      worst = std::max(
          worst, std::fabs(static_cast<double>(got.data<float>()[i]) - want.data<float>()[i]));
    }
    EXPECT_LE(worst, 2.4e-7 * scale) << what;  // two float roundings (2^-23) of the scale
  };
  close(mean, mean_ref, "saved mean");
  close(inv, inv_ref, "saved 1/sqrt(var + eps)");
  close(rm, rm_ref, "running mean");
  close(rv, rv_ref, "running var");
  close(y, y_ref, "y");

  Tensor dx_ref = zeros(s), dg_ref = zeros(c), db_ref = zeros(c);
  Tensor dx = zeros(s), dg = zeros(c), db = zeros(c);
  cpu.batch_norm_backward(x, dy, gamma, mean_ref, inv_ref, dx_ref, dg_ref, db_ref);
  reduce_channels_on_host(
      BatchNormBackwardSums<float>{x.data<float>(), dy.data<float>(), mean_ref.data<float>(),
                                   inv_ref.data<float>(), layout},
      channels, m, parts, sums.data());
  run_on_host(channels, BatchNormBackwardChannel<float>{sums.data(), parts, m, gamma.data<float>(),
                                                        inv_ref.data<float>(), channel.data(),
                                                        dg.data<float>(), db.data<float>()});
  run_on_host(x.numel(), BatchNormBackwardData<float>{x.data<float>(), dy.data<float>(),
                                                      mean_ref.data<float>(), inv_ref.data<float>(),
                                                      channel.data(), layout, dx.data<float>()});
  close(dg, dg_ref, "dgamma");
  close(db, db_ref, "dbeta");
  close(dx, dx_ref, "dx");
}

TEST_F(KernelMath, BatchNormInferenceIsTheCpuBackends) {
  const Shape s{3, 4, 5, 2};
  const Tensor x = random(s), gamma = random(Shape{4}), beta = random(Shape{4});
  const Tensor rm = random(Shape{4}), rv = random(Shape{4}, 0.1f, 3.f);
  Tensor y_ref = zeros(s), y = zeros(s);
  cpu.batch_norm_infer(x, gamma, beta, rm, rv, y_ref, 1e-5f);
  run_on_host(y.numel(),
              BatchNormInfer<float>{x.data<float>(), gamma.data<float>(), beta.data<float>(),
                                    rm.data<float>(), rv.data<float>(), 1e-5f,
                                    ChannelRows{4, 10, false}, y.data<float>()});
  EXPECT_EQ(values(y), values(y_ref));
}

// The block's tree (channel_reduce.h): with integer-valued sums every grouping is exact, so each
// (channel, part) must hold exactly its own span's values, each once and at its storage offset
// (ChannelWalk's, against ChannelRows::value_at), however the 256 threads and the parts divide
// them, in either layout; the parts cover the channel.
TEST(ChannelReduce, EveryValueOnceInItsPartAtItsOffset) {
  struct CountAndOffsetSum {
    using Acc = SumPair;
    ChannelRows layout;
    DLB_HD void add(SumPair& a, int64_t, int64_t at) const {
      a.first += 1;
      a.second += static_cast<double>(at);
    }
  };
  for (const bool channels_last : {false, true}) {
    for (const int64_t inner : {int64_t{1}, int64_t{7}, int64_t{300}}) {
      for (const int64_t n : {int64_t{1}, int64_t{37}, int64_t{20}}) {
        const ChannelRows layout{3, inner, channels_last};
        const int64_t per_channel = n * inner;
        for (const int64_t parts : {int64_t{1}, int64_t{2}, int64_t{7}}) {
          std::vector<SumPair> out(3 * parts);
          reduce_channels_on_host(CountAndOffsetSum{layout}, 3, per_channel, parts, out.data());
          for (int64_t c = 0; c < 3; ++c) {
            int64_t next = 0;
            for (int64_t p = 0; p < parts; ++p) {
              const ReduceSpan span = part_span(per_channel, parts, p);
              EXPECT_EQ(span.begin, next);
              next = span.end;
              double offsets = 0;
              for (int64_t j = span.begin; j < span.end; ++j) offsets += layout.value_at(c, j);
              const SumPair& got = out[c * parts + p];
              EXPECT_EQ(got.first, static_cast<double>(span.end - span.begin));
              EXPECT_EQ(got.second, offsets) << channels_last << " " << inner << " " << n;
            }
            EXPECT_EQ(next, per_channel);
          }
        }
      }
    }
  }
}

// Welford's moments of a channel against the two-pass sums the CPU backend takes, in double, over
// 40,000 values with a large mean (the case a one-pass sum of squares loses). The bounds are Chan,
// Golub and LeVeque's for the updating algorithm: the mean within n * u of itself, the variance
// within n * kappa * u, kappa = sqrt(1 + mean^2 / var) its condition number (about 173 here), u
// the double unit roundoff; the two-pass reference errs by as much again, so each bound is
// doubled.
TEST(ChannelReduce, WelfordMomentsAreTheTwoPassOnes) {
  Rng rng{11};
  std::vector<float> x(40000);
  for (float& v : x) v = 100.f + rng.uniform(-1.f, 1.f);
  double sum = 0;
  for (float v : x) sum += v;
  const double mean = sum / static_cast<double>(x.size());
  double sq = 0;
  for (float v : x) sq += (v - mean) * (v - mean);
  const double var = sq / static_cast<double>(x.size());
  const ChannelRows layout{1, 40000, false};
  for (const int64_t parts : {int64_t{1}, reduce_parts(1, 40000)}) {
    std::vector<Welford> out(parts);
    reduce_channels_on_host(BatchNormMoments<float>{x.data(), layout}, 1, 40000, parts, out.data());
    Welford w{};
    for (const Welford& p : out) w = Welford::merge(w, p);
    const double n = 40000, u = 0x1p-53, kappa = std::sqrt(1 + mean * mean / var);
    EXPECT_EQ(w.count, n);
    EXPECT_NEAR(w.mean, mean, 2 * n * u * mean);
    EXPECT_NEAR(w.m2 / w.count, var, 2 * n * kappa * u * var);
  }
}

TEST(ChannelReduce, PartsFillTheGpuOnlyWhereChannelsDoNot) {
  EXPECT_EQ(reduce_parts(64, 256 * 112 * 112), 16);  // resnet50's first batch norm at batch 256
  EXPECT_EQ(reduce_parts(2048, 256 * 7 * 7), 1);     // its last: channels enough
  EXPECT_EQ(reduce_parts(6, 60), 1);                 // a part keeps 16,384 values or more
  EXPECT_EQ(reduce_parts(1, 16384 * 3), 3);
  EXPECT_EQ(reduce_parts(1, 16384 * 3 - 1), 2);
  EXPECT_EQ(reduce_parts(1, int64_t{1} << 40), 1024);
  EXPECT_LE(reduce_parts(1, int64_t{1} << 40), 65535);
  EXPECT_EQ(reduce_parts(0, 10), 1);
}

TEST_F(KernelMath, FillWritesEveryIndex) {
  Tensor t = random(kShape), ref = zeros(kShape);
  cpu.fill(ref, 2.5f);
  run_on_host(t.numel(), Fill<float>{t.data<float>(), 2.5f});
  EXPECT_EQ(values(t), values(ref));
}

// The grid-stride loop of launch.cuh, simulated: every index of [0, n) exactly once.
TEST(LaunchGrid, VisitsEveryIndexExactlyOnce) {
  for (int64_t n : {1, 255, 256, 257, 1000, 65536 + 3}) {
    for (int64_t max_blocks : {int64_t{1}, int64_t{3}, kMaxBlocks}) {
      const Grid g = grid_for(n, kThreadsPerBlock, max_blocks);
      ASSERT_GE(g.blocks, 1);
      ASSERT_LE(g.blocks, max_blocks);
      std::vector<int> hits(n, 0);
      const int64_t stride = g.blocks * g.threads;
      for (int64_t b = 0; b < g.blocks; ++b) {
        for (int64_t t = 0; t < g.threads; ++t) {
          for (int64_t i = b * g.threads + t; i < n; i += stride) ++hits[i];
        }
      }
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << "n " << n << " index " << i;
    }
  }
}

TEST(LaunchGrid, EmptyLaunchesNothingAndHugeStaysWithinTheLimit) {
  EXPECT_EQ(grid_for(0).blocks, 0);
  const int64_t huge = int64_t{3} << 32;  // more elements than a 32-bit index reaches
  const Grid g = grid_for(huge);
  EXPECT_EQ(g.blocks, kMaxBlocks);
  EXPECT_LT(g.blocks, int64_t{1} << 31);  // gridDim.x's limit
}

}  // namespace
}  // namespace dlb::cuda
