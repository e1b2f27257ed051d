// CPU ops against values worked out by hand or with PyTorch's documented semantics.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/matmul_onednn.h"
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

}  // namespace
}  // namespace dlb
