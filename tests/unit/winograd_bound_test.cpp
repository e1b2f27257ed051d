// The op checker's bound for oneDNN's Winograd F(4x4, 3x3) (runtime/check/reference_winograd.cpp):
// its magnitudes are never below a direct convolution's Σ|aᵢ||bᵢ|, they grow by the transforms'
// row sums on an interior tile, and the bound is needed: oneDNN's Winograd, judged as a sum of
// products, fails by far, and within its own bound passes.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/delegating_backend.h"
#include "runtime/check/op_checker.h"
#include "runtime/check/reference.h"
#include "runtime/core/rng.h"

namespace dlb {
namespace {

ConvDesc desc(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k) {
  ConvDesc d;
  d.batch = n, d.in_channels = c, d.height = h, d.width = w, d.out_channels = k;
  d.kernel_h = d.kernel_w = 3, d.stride_h = d.stride_w = 1, d.pad_h = d.pad_w = 1;
  return d;
}

HostArray drawn(const Shape& s, uint64_t seed) {
  HostArray a(s);
  Rng rng(seed);
  for (double& v : a.v) v = rng.normal(0.f, 1.f);
  return a;
}

// Σ|x||w| of each output of a direct convolution, and of each input gradient and weight
// gradient, by loops written from the definition.
struct DirectMagnitudes {
  std::vector<double> y, dx, dw;
};
DirectMagnitudes direct(const ConvDesc& d, const HostArray& x, const HostArray& w,
                        const HostArray& dy) {
  const int64_t n = d.batch, c = d.in_channels, h = d.height, wd = d.width, k = d.out_channels;
  DirectMagnitudes m{std::vector<double>(dy.v.size()), std::vector<double>(x.v.size()),
                     std::vector<double>(w.v.size())};
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < k; ++o)
      for (int64_t oy = 0; oy < h; ++oy)
        for (int64_t ox = 0; ox < wd; ++ox)
          for (int64_t ch = 0; ch < c; ++ch)
            for (int64_t r = 0; r < 3; ++r)
              for (int64_t s = 0; s < 3; ++s) {
                const int64_t iy = oy - 1 + r, ix = ox - 1 + s;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                const size_t yi = static_cast<size_t>(((i * k + o) * h + oy) * wd + ox);
                const size_t xi = static_cast<size_t>(((i * c + ch) * h + iy) * wd + ix);
                const size_t wi = static_cast<size_t>(((o * c + ch) * 3 + r) * 3 + s);
                m.y[yi] += std::fabs(x.v[xi] * w.v[wi]);
                m.dx[xi] += std::fabs(dy.v[yi] * w.v[wi]);
                m.dw[wi] += std::fabs(dy.v[yi] * x.v[xi]);
              }
  return m;
}

void expect_at_least(const std::vector<double>& winograd, const std::vector<double>& products,
                     const char* what) {
  ASSERT_EQ(winograd.size(), products.size()) << what;
  for (size_t i = 0; i < products.size(); ++i) {
    // Each weight-input pair of the direct sum is a sum of Winograd's terms whose coefficients
    // add up to 1 (to the digits the transforms are written with).
    ASSERT_GE(winograd[i], products[i] * (1 - 1e-12)) << what << "[" << i << "]";
  }
}

// Tiles cut by the right and bottom edges (9x10 is not a multiple of 4).
TEST(WinogradBound, ItsMagnitudesAreNeverBelowTheDirectSums) {
  const ConvDesc d = desc(2, 5, 9, 10, 3);
  const HostArray x = drawn({2, 5, 9, 10}, 1), w = drawn({3, 5, 3, 3}, 2),
                  dy = drawn({2, 3, 9, 10}, 3);
  const DirectMagnitudes m = direct(d, x, w, dy);
  expect_at_least(winograd_forward_magnitude(d, x, w), m.y, "y");
  expect_at_least(winograd_backward_data_magnitude(d, dy, w), m.dx, "dx");
  expect_at_least(winograd_backward_filter_magnitude(d, x, dy), m.dw, "dw");
}

// With every input and weight 1, an interior output (i, j) of a tile is κᵢκⱼ, where κᵢ sums
// |Aᵀ|ᵢₚ · (row p of |G|, summed) · (row p of |Bᵀ|, summed) over p: the transforms' growth,
// from oneDNN's coefficients (tests/benchdnn/conv/ref_wino.cpp) summed by hand.
TEST(WinogradBound, AnInteriorTileGrowsByTheTransformsRowSums) {
  const double g[6] = {1.13777777777778,  1.387563025210084, 1.387563025210084,
                       0.567693744164332, 0.567693744164332, 1};  // |G|'s rows, summed
  const double b[6] = {4.51953125, 5.28125, 5.28125, 3.4765625, 3.4765625, 4.51953125};
  const double a[4][6] = {{1, 1, 1, 1, 1, 0},
                          {0, 0.625, 0.625, 1.5, 1.5, 0},
                          {0, 0.390625, 0.390625, 2.25, 2.25, 0},
                          {0, 0.244140625, 0.244140625, 3.375, 3.375, 1}};
  double kappa[4] = {};
  for (int i = 0; i < 4; ++i)
    for (int p = 0; p < 6; ++p) kappa[i] += a[i][p] * g[p] * b[p];
  const ConvDesc d = desc(1, 1, 12, 12, 1);
  HostArray x(Shape{1, 1, 12, 12}), w(Shape{1, 1, 3, 3});
  for (double& v : x.v) v = 1;
  for (double& v : w.v) v = 1;
  const std::vector<double> m = winograd_forward_magnitude(d, x, w);
  // The tile of outputs 4..7 reads inputs 3..8: every one inside the image.
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      EXPECT_NEAR(m[static_cast<size_t>((4 + i) * 12 + 4 + j)], kappa[i] * kappa[j],
                  1e-5 * kappa[i] * kappa[j])
          << i << "," << j;
}

// The CPU backend with --conv-algo=winograd, whose plans claim sums of products: the op checker
// then judges oneDNN's Winograd by a direct convolution's bound.
class HiddenWinograd final : public ConvPlan {
 public:
  explicit HiddenWinograd(std::unique_ptr<ConvPlan> inner)
      : ConvPlan(inner->desc()), inner_(std::move(inner)) {}
  size_t workspace_bytes() const override { return inner_->workspace_bytes(); }
  std::vector<PassAlgorithm> algorithms() const override {
    std::vector<PassAlgorithm> out = inner_->algorithms();
    for (PassAlgorithm& a : out) a.arithmetic = ConvArithmetic::kProducts;
    return out;
  }
  const ConvPlan& inner() const { return *inner_; }

 private:
  std::unique_ptr<ConvPlan> inner_;
};

class HidingBackend final : public DelegatingBackend {
 public:
  HidingBackend() : DelegatingBackend(winograd()) {}
  std::unique_ptr<ConvPlan> make_conv_plan(const ConvDesc& d) override {
    return std::make_unique<HiddenWinograd>(DelegatingBackend::make_conv_plan(d));
  }
  void conv_forward(const ConvPlan& p, const Tensor& x, const Tensor& w, Tensor& y) override {
    DelegatingBackend::conv_forward(inner(p), x, w, y);
  }
  void conv_backward_data(const ConvPlan& p, const Tensor& dy, const Tensor& w,
                          Tensor& dx) override {
    DelegatingBackend::conv_backward_data(inner(p), dy, w, dx);
  }
  void conv_backward_filter(const ConvPlan& p, const Tensor& x, const Tensor& dy,
                            Tensor& dw) override {
    DelegatingBackend::conv_backward_filter(inner(p), x, dy, dw);
  }

 private:
  static std::unique_ptr<Backend> winograd() {
    BackendOptions o;
    o.conv_algo = ConvAlgoChoice::kWinograd;
    return std::make_unique<CpuBackend>(o);
  }
  static const ConvPlan& inner(const ConvPlan& p) {
    return static_cast<const HiddenWinograd&>(p).inner();
  }
};

// resnet18's layer4 at 64 px: 2x2 feature maps, mostly padding, where Winograd's transforms mix
// in terms that a direct convolution never computes.
constexpr const char* kLayer4 =
    "conv:shape=2x512x2x2,k=512,kernel=3,stride=1,pad=1,groups=1,bias=0";

TEST(WinogradBound, OnednnsWinogradPassesItsBoundAndFailsTheDirectOne) {
  CheckConfig cfg;
  cfg.passes = {CheckPass::kBackwardWeights};
  BackendOptions o;
  o.conv_algo = ConvAlgoChoice::kWinograd;
  CpuBackend honest(o);
  const std::vector<PassResult> fair = check_instance(honest, parse_op_instance(kLayer4), cfg);
  ASSERT_EQ(fair.size(), 1u);
  if (fair[0].algorithm.find("wino") == std::string::npos) {
    GTEST_SKIP() << "this machine's oneDNN has no Winograd (2.6: AVX-512 cores only)";
  }
  EXPECT_EQ(fair[0].status, CheckStatus::kOk) << fair[0].worst.ratio;
  EXPECT_NE(fair[0].algorithm.find("jit_wino_4x3"), std::string::npos) << fair[0].algorithm;

  HidingBackend hiding;
  const std::vector<PassResult> judged = check_instance(hiding, parse_op_instance(kLayer4), cfg);
  ASSERT_EQ(judged.size(), 1u);
  EXPECT_EQ(judged[0].status, CheckStatus::kFail);
  EXPECT_GT(judged[0].worst.ratio, 10) << "a direct convolution's bound fits Winograd's error";
}

}  // namespace
}  // namespace dlb
