// CPU ops against values worked out by hand or with PyTorch's documented semantics.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/onednn_engine.h"
#include "runtime/core/error.h"
#include "runtime/core/half.h"
#include "runtime/core/rng.h"

namespace dlb {
namespace {

class CpuOps : public ::testing::Test {
 protected:
  Tensor make(const Shape& s, std::vector<float> v) {
    Tensor t = b.empty(s, DType::kF32, MemCategory::kActivations, "t");
    b.copy_from_host(v.data(), t);
    return t;
  }
  std::vector<float> get(const Tensor& t) {
    std::vector<float> v(t.numel());
    b.copy_to_host(t, v.data());
    return v;
  }
  CpuBackend b{{}};
};

TEST_F(CpuOps, SoftmaxCrossEntropyIsTheBatchMean) {
  Tensor logits = make({2, 3}, {1, 2, 3, 0, 0, 0});
  Tensor labels = b.empty({2}, DType::kI64, MemCategory::kData, "labels");
  const int64_t l[] = {2, 1};
  b.copy_from_host(l, labels);
  Tensor probs = make({2, 3}, {0, 0, 0, 0, 0, 0}), loss = make({1}, {0});
  b.softmax_cross_entropy(logits, labels, probs, loss);
  const double l0 = -std::log(std::exp(3.0) / (std::exp(1.0) + std::exp(2.0) + std::exp(3.0)));
  const double l1 = std::log(3.0);
  EXPECT_NEAR(get(loss)[0], (l0 + l1) / 2, 1e-6);
  Tensor d = make({2, 3}, {0, 0, 0, 0, 0, 0});
  b.softmax_cross_entropy_backward(probs, labels, d);
  EXPECT_NEAR(get(d)[4], (1.0 / 3 - 1) / 2, 1e-6);
  const int64_t bad[] = {3, 0};
  b.copy_from_host(bad, labels);
  EXPECT_THROW(b.softmax_cross_entropy(logits, labels, probs, loss), InvalidArgument);
}

TEST_F(CpuOps, BatchNormUpdatesRunningStatsWithUnbiasedVariance) {
  Tensor x = make({4, 1}, {1, 2, 3, 6});  // mean 3, biased var 3.5, unbiased 14/3
  Tensor g = make({1}, {1}), beta = make({1}, {0}), rm = make({1}, {0}), rv = make({1}, {1});
  Tensor sm = make({1}, {0}), si = make({1}, {0}), y = make({4, 1}, {0, 0, 0, 0});
  b.batch_norm_train(x, g, beta, rm, rv, sm, si, y, 0.1f, 1e-5f);
  EXPECT_NEAR(get(rm)[0], 0.3, 1e-6);
  EXPECT_NEAR(get(rv)[0], 0.9 + 0.1 * 14.0 / 3, 1e-6);
  EXPECT_NEAR(get(y)[3], 3 / std::sqrt(3.5 + 1e-5), 1e-5);
}

TEST_F(CpuOps, InvertedDropoutScalesKeptValues) {
  const int64_t n = 20000;
  Tensor x = make({n}, std::vector<float>(n, 1.f));
  Tensor mask = make({n}, std::vector<float>(n, 0.f)), y = make({n}, std::vector<float>(n, 0.f));
  b.dropout_forward(x, 0.25f, 99, mask, y);
  int64_t kept = 0;
  for (float v : get(y)) {
    ASSERT_TRUE(v == 0.f || std::abs(v - 1.f / 0.75f) < 1e-6);
    kept += v != 0.f;
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.75, 0.01);
}

TEST_F(CpuOps, SgdMatchesTorchFormula) {
  Tensor p = make({2}, {1.f, -2.f}), g = make({2}, {0.5f, 0.25f}), buf = make({2}, {0.f, 0.f});
  const SgdConfig cfg{0.1f, 0.9f, 0.01f};
  b.sgd_update(cfg, g, buf, p);  // buf = g + wd*p; p -= lr*buf
  EXPECT_NEAR(get(p)[0], 1.f - 0.1f * (0.5f + 0.01f), 1e-7);
  b.sgd_update(cfg, g, buf, p);  // buf = 0.9*buf + g + wd*p
  const float p1 = 1.f - 0.1f * 0.51f;
  const float buf2 = 0.9f * 0.51f + 0.5f + 0.01f * p1;
  EXPECT_NEAR(get(p)[0], p1 - 0.1f * buf2, 1e-6);
}

TEST_F(CpuOps, AdaptiveAvgPoolUsesTorchBins) {
  // 5 -> 3 bins: [0,2) [1,4) [3,5), as torch's start=floor(i*5/3), end=ceil((i+1)*5/3).
  Tensor x = make({1, 1, 1, 5}, {1, 2, 3, 4, 5}), y = make({1, 1, 1, 3}, {0, 0, 0});
  b.adaptive_avg_pool_forward(x, y);
  const auto v = get(y);
  EXPECT_FLOAT_EQ(v[0], 1.5f);
  EXPECT_FLOAT_EQ(v[1], 3.f);
  EXPECT_FLOAT_EQ(v[2], 4.5f);
}

TEST_F(CpuOps, MaxPoolIgnoresPaddingAndAvgCountsIt) {
  Tensor x = make({1, 1, 2, 2}, {-1, -2, -3, -4}), y = make({1, 1, 1, 1}, {0});
  b.pool_forward(PoolDesc{PoolMode::kMax, 3, 3, 2, 2, 1, 1, true}, x, y);
  EXPECT_FLOAT_EQ(get(y)[0], -1.f);  // padding is -inf, not 0
  b.pool_forward(PoolDesc{PoolMode::kAvg, 3, 3, 2, 2, 1, 1, true}, x, y);
  EXPECT_FLOAT_EQ(get(y)[0], -10.f / 9);
  b.pool_forward(PoolDesc{PoolMode::kAvg, 3, 3, 2, 2, 1, 1, false}, x, y);
  EXPECT_FLOAT_EQ(get(y)[0], -10.f / 4);
}

// Ties: the first maximum in scan order takes the gradient (PyTorch's max_pool2d), and -0 and +0
// tie. Each window sees the maximum late, early, twice, and as the only value above -inf.
TEST_F(CpuOps, MaxPoolTiesSendTheGradientToTheFirstMaximum) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = make({1, 4, 2, 2}, {1, 2, 3, 3,             //
                                 3, 3, 1, 2,             //
                                 -0.f, 0.f, -inf, -inf,  //
                                 -inf, -inf, -inf, -inf});
  Tensor y = make({1, 4, 1, 1}, {0, 0, 0, 0});
  const PoolDesc max2{PoolMode::kMax, 2, 2, 2, 2, 0, 0, true};
  b.pool_forward(max2, x, y);
  EXPECT_EQ(get(y), (std::vector<float>{3, 3, 0, -inf}));
  EXPECT_TRUE(std::signbit(get(y)[2])) << "-0 came first and +0 does not exceed it";
  Tensor dy = make({1, 4, 1, 1}, {1, 2, 3, 4}), dx = make({1, 4, 2, 2}, std::vector<float>(16, 9));
  b.pool_backward(max2, x, y, dy, dx);
  EXPECT_EQ(get(dx), (std::vector<float>{0, 0, 1, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0}));
}

// A NaN propagates as in PyTorch, so that a diverging run shows in its loss: torch.relu(nan) is
// nan and its gradient passes (threshold_backward masks y <= 0 only); max_pool2d takes a NaN over
// any value, and its last NaN takes the gradient.
TEST_F(CpuOps, NanPropagatesThroughReluAndMaxPoolAsInPyTorch) {
  const float nan = std::nanf("");
  Tensor x = make({4}, {nan, -1.f, 2.f, -0.f}), y = make({4}, {0, 0, 0, 0});
  b.relu_forward(x, y);
  const auto r = get(y);
  EXPECT_TRUE(std::isnan(r[0]));
  EXPECT_EQ(r[1], 0.f);
  EXPECT_EQ(r[2], 2.f);
  EXPECT_EQ(r[3], 0.f);
  Tensor dy = make({4}, {1, 2, 3, 4}), dx = make({4}, {0, 0, 0, 0});
  b.relu_backward(y, dy, dx);
  EXPECT_EQ(get(dx), (std::vector<float>{1, 0, 3, 0}));

  Tensor px = make({1, 1, 2, 2}, {1, nan, 5, nan}), py = make({1, 1, 1, 1}, {0});
  const PoolDesc max2{PoolMode::kMax, 2, 2, 2, 2, 0, 0, true};
  b.pool_forward(max2, px, py);
  EXPECT_TRUE(std::isnan(get(py)[0]));
  Tensor pdy = make({1, 1, 1, 1}, {7}), pdx = make({1, 1, 2, 2}, {0, 0, 0, 0});
  b.pool_backward(max2, px, py, pdy, pdx);
  EXPECT_EQ(get(pdx), (std::vector<float>{0, 0, 0, 7}));
}

// f32 math everywhere (no TF32), over f32, f16 or bf16 storage.
// f32 matrix products (oneDNN's, or sgemm's) against a loop in double, on small integers where
// every sum is exact: each transpose, alpha and beta (c read and scaled), and k = 0 (c = beta c).
TEST_F(CpuOps, F32MatmulEqualsALoopOnExactValuesEveryTransposeAndScale) {
  Rng rng(3);
  const auto ints = [&](int64_t count) {
    std::vector<float> v(static_cast<size_t>(count));
    for (float& x : v) x = static_cast<float>(static_cast<int>(rng.next_u64() % 7) - 3);
    return v;
  };
  for (const int64_t k : {int64_t{0}, int64_t{33}}) {
    const int64_t m = 5, n = 7;
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        for (auto [alpha, beta] : {std::pair{1.f, 0.f}, {2.f, 0.5f}, {-1.f, 1.f}}) {
          const std::vector<float> av = ints(m * k), bv = ints(k * n), cv = ints(m * n);
          std::vector<float> want(cv.size());
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              double sum = 0;
              for (int64_t q = 0; q < k; ++q) {
                sum += double{av[ta ? q * m + i : i * k + q]} * bv[tb ? j * k + q : q * n + j];
              }
              want[i * n + j] = static_cast<float>(alpha * sum + beta * cv[i * n + j]);
            }
          }
          Tensor a = make(ta ? Shape{k, m} : Shape{m, k}, av);
          Tensor c = make(tb ? Shape{n, k} : Shape{k, n}, bv), y = make({m, n}, cv);
          b.matmul(Precision::kFp32, ta, tb, alpha, a, c, beta, y);
          EXPECT_EQ(get(y), want) << "k " << k << " trans_a " << ta << " trans_b " << tb
                                  << " alpha " << alpha << " beta " << beta;
        }
      }
    }
  }
}

TEST_F(CpuOps, SupportsEveryStorageButNotTf32) {
  const auto types = [](Precision p) { return OpTypes::of(PrecisionPolicy::for_precision(p)); };
  for (Precision p : {Precision::kFp32, Precision::kFp16, Precision::kBf16}) {
    EXPECT_TRUE(b.supports(Op::kConv, types(p))) << precision_name(p);
    EXPECT_NO_THROW(b.require(Op::kLossScale, types(p)));
  }
  EXPECT_FALSE(b.supports(Op::kConv, types(Precision::kTf32)));
  EXPECT_THROW(b.require(Op::kMatmul, types(Precision::kTf32)), Unsupported);
  EXPECT_FALSE(b.supports(Op::kBatchNorm, OpTypes{Precision::kBf16, DType::kI64, DType::kF32}));
}

// A 16-bit op is the f32 op on the widened inputs, rounded once to nearest even on store: bit
// for bit, whether the output is written only (beta 0), read and written (beta 0.5), or is also
// the input (ReLU in place). A bf16 matmul on a CPU that multiplies bf16 natively is oneDNN's,
// whose sums are grouped its own way (cpu_bf16_test.cpp checks it).
TEST_F(CpuOps, SixteenBitOpsComputeInF32AndRoundOnStore) {
  Rng rng(4);
  const auto random = [&](int64_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = rng.uniform(-3.f, 3.f);
    return v;
  };
  const auto stored = [&](const std::vector<float>& v, const Shape& s, DType t) {
    Tensor out = b.empty(s, t, MemCategory::kActivations, "16-bit");
    floats_to_dtype(v.data(), out.numel(), t, out.raw());
    return out;
  };
  const auto widened = [&](const Tensor& t) {
    std::vector<float> v(t.numel());
    dtype_to_floats(t.raw(), t.numel(), t.dtype(), v.data());
    return v;
  };
  for (DType t : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const Tensor a = stored(random(15), {3, 5}, t), w = stored(random(20), {5, 4}, t);
    const bool views = t == DType::kF16 || !cpu_multiplies_bf16();
    for (float beta : views ? std::vector<float>{0.f, 0.5f} : std::vector<float>{}) {
      Tensor c = stored(random(12), {3, 4}, t);
      Tensor c32 = make({3, 4}, widened(c));
      b.matmul(Precision::kBf16, false, false, 1.f, a, w, beta, c);
      b.matmul(Precision::kFp32, false, false, 1.f, make({3, 5}, widened(a)),
               make({5, 4}, widened(w)), beta, c32);
      const Tensor want = stored(get(c32), {3, 4}, t);
      EXPECT_EQ(std::memcmp(c.raw(), want.raw(), c.bytes()), 0) << "beta " << beta;
    }
    Tensor y = stored(random(12), {12}, t);
    std::vector<float> relu = widened(y);
    for (float& x : relu) x = x > 0.f ? x : 0.f;
    b.relu_forward(y, y);
    EXPECT_EQ(widened(y), relu);
  }
}

// The CPU's fused batch norm + ReLU is batch norm then ReLU (the Backend's composition): the same
// bits in f32, and in bf16 the same values (a zero's sign may differ: the fused ReLU precedes the
// rounding); its backward, the same bits in both, dx in place of dy included.
TEST_F(CpuOps, FusedBatchNormReluIsTheComposedPair) {
  Rng rng(9);
  const Shape xs{4, 3, 5, 5};
  for (DType t : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const auto random = [&](const Shape& s, DType type) {
      std::vector<float> v(static_cast<size_t>(s.numel()));
      for (float& x : v) x = rng.normal(0.f, 1.f);
      Tensor w = make(s, v);
      Tensor out = b.empty(s, type, MemCategory::kActivations, "t");
      b.cast(w, out);
      return out;
    };
    const auto floats = [&](const Tensor& x) {
      Tensor w = b.empty(x.shape(), DType::kF32, MemCategory::kActivations, "f32");
      b.cast(x, w);
      return get(w);
    };
    const auto bits = [&](const Tensor& x) {
      std::vector<uint8_t> v(x.bytes());
      b.copy_to_host(x, v.data());
      return v;
    };
    Tensor x = random(xs, t), g = random({3}, DType::kF32), beta = random({3}, DType::kF32);
    Tensor stats[2][4], y[2];
    for (int k = 0; k < 2; ++k) {
      for (Tensor& st : stats[k]) st = make({3}, {0.1f, 0.2f, 0.3f});
      y[k] = b.empty(xs, t, MemCategory::kActivations, "y");
    }
    b.batch_norm_relu_train(x, g, beta, stats[0][0], stats[0][1], stats[0][2], stats[0][3], y[0],
                            0.1f, 1e-5f);
    b.Backend::batch_norm_relu_train(x, g, beta, stats[1][0], stats[1][1], stats[1][2], stats[1][3],
                                     y[1], 0.1f, 1e-5f);
    EXPECT_EQ(floats(y[0]), floats(y[1]));
    if (t == DType::kF32) {
      EXPECT_EQ(bits(y[0]), bits(y[1]));  // -0 included
    }
    for (int i = 0; i < 4; ++i) EXPECT_EQ(get(stats[0][i]), get(stats[1][i])) << i;
    const Tensor dy = random(xs, t);
    Tensor dx[2] = {b.empty(xs, t, MemCategory::kActivations, "dx"), random(xs, t)};
    b.copy(dy, dx[1]);  // the composition's dx in place of dy
    Tensor dg[2] = {make({3}, {0, 0, 0}), make({3}, {0, 0, 0})};
    Tensor db[2] = {make({3}, {0, 0, 0}), make({3}, {0, 0, 0})};
    b.batch_norm_relu_backward(x, y[1], dy, g, stats[1][2], stats[1][3], dx[0], dg[0], db[0]);
    Tensor in_place = random(xs, t);  // the fused backward with dx in place of dy, too
    b.copy(dy, in_place);
    Tensor dg2 = make({3}, {0, 0, 0}), db2 = make({3}, {0, 0, 0});
    b.batch_norm_relu_backward(x, y[1], in_place, g, stats[1][2], stats[1][3], in_place, dg2, db2);
    EXPECT_EQ(bits(in_place), bits(dx[0]));
    EXPECT_EQ(bits(dg2), bits(dg[0]));
    b.Backend::batch_norm_relu_backward(x, y[1], dx[1], g, stats[1][2], stats[1][3], dx[1], dg[1],
                                        db[1]);
    EXPECT_EQ(bits(dx[0]), bits(dx[1]));
    EXPECT_EQ(bits(dg[0]), bits(dg[1]));
    EXPECT_EQ(bits(db[0]), bits(db[1]));
  }
}

// The CPU's one-pass mixed-precision update (16-bit gradient in, 16-bit compute copy out) is the
// composed update and cast bit for bit: plain, loss-scaled, and skipped (an inf found), with
// weight decay, over more elements than one chunk or one thread's block.
TEST_F(CpuOps, OnePassUpdateWithCopyIsTheComposedOneBitForBit) {
  Rng rng(7);
  const int64_t n = (int64_t{1} << 16) + 1234;
  const auto filled = [&](DType t, float scale) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = scale * rng.normal(0.f, 1.f);
    Tensor w = b.empty({n}, DType::kF32, MemCategory::kActivations, "f32");
    b.copy_from_host(v.data(), w);
    Tensor out = b.empty({n}, t, MemCategory::kActivations, "t");
    b.cast(w, out);
    return out;
  };
  const auto bits = [&](const Tensor& t) {
    std::vector<uint8_t> v(t.bytes());
    b.copy_to_host(t, v.data());
    return v;
  };
  SgdConfig cfg;
  cfg.lr = 0.1f, cfg.momentum = 0.9f, cfg.weight_decay = 1e-4f;
  for (DType t : {DType::kBF16, DType::kF16}) {
    for (float found_inf : {-1.f, 0.f, 1.f}) {  // -1: no loss scaling
      SCOPED_TRACE(std::string(dtype_name(t)) + " found_inf " + std::to_string(found_inf));
      const Tensor grad = filled(t, 1e-2f);
      Tensor scaler = make({4}, {0, 0, 0, 0});
      std::vector<float> state(4, 0.f);
      state[kScaleSlot] = 1024.f, state[kFoundInfSlot] = found_inf < 0 ? 0.f : found_inf;
      b.copy_from_host(state.data(), scaler);
      const Tensor* scale = found_inf < 0 ? nullptr : &scaler;
      Tensor p1 = filled(DType::kF32, 1.f), m1 = filled(DType::kF32, 0.1f), c1 = filled(t, 1.f);
      Tensor p2 = b.empty({n}, DType::kF32, MemCategory::kActivations, "p"),
             m2 = b.empty({n}, DType::kF32, MemCategory::kActivations, "m"),
             c2 = b.empty({n}, t, MemCategory::kActivations, "c");
      b.copy(p1, p2), b.copy(m1, m2), b.copy(c1, c2);
      const std::vector<uint8_t> before = bits(c1);
      b.sgd_update_with_copy(cfg, grad, scale, m1, p1, c1);
      b.Backend::sgd_update_with_copy(cfg, grad, scale, m2, p2, c2);
      EXPECT_EQ(bits(p1), bits(p2));
      EXPECT_EQ(bits(m1), bits(m2));
      // a skipped step leaves the copy (in a run, the cast of the unchanged weights already)
      if (found_inf != 1.f) {
        EXPECT_EQ(bits(c1), bits(c2));
      } else {
        EXPECT_EQ(bits(c1), before);
      }
    }
  }
}

}  // namespace
}  // namespace dlb
