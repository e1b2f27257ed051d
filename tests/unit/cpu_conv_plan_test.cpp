// How the CPU convolution plan chooses its algorithm per pass: the heuristic takes oneDNN unless
// oneDNN has only its reference loops; the workspace limit is kept by every pass; a limit that no
// algorithm fits, or a forced algorithm that does not fit, is refused with both algorithms' needs;
// Winograd and auto run where oneDNN has them, and elsewhere the heuristic's choice, with why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "runtime/backend/cpu/conv_im2col.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/core/error.h"
#include "runtime/core/rng.h"

namespace dlb {
namespace {

// resnet18's first strided 3x3 convolution (layer2) at 64x64 images, batch 4.
ConvDesc layer() {
  ConvDesc d;
  d.batch = 4, d.in_channels = 64, d.height = d.width = 16, d.out_channels = 128;
  d.kernel_h = d.kernel_w = 3, d.stride_h = d.stride_w = 2, d.pad_h = d.pad_w = 1;
  return d;
}

std::unique_ptr<ConvPlan> plan(ConvAlgoChoice how, std::optional<size_t> limit = std::nullopt) {
  BackendOptions o;
  o.conv_algo = how;
  o.workspace_limit = limit;
  CpuBackend b(o);
  return b.make_conv_plan(layer());
}

bool starts_with(const std::string& s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

TEST(CpuConvPlan, HeuristicTakesOnednnUnlessItHasOnlyReferenceLoops) {
  const auto chosen = plan(ConvAlgoChoice::kHeuristic)->algorithms();
  const auto onednn = plan(ConvAlgoChoice::kOnednn)->algorithms();
  ASSERT_EQ(chosen.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const bool reference = starts_with(onednn[i].algorithm, "onednn ref");
    EXPECT_EQ(chosen[i].algorithm, reference
                                       ? plan(ConvAlgoChoice::kIm2col)->algorithms()[i].algorithm
                                       : onednn[i].algorithm)
        << conv_pass_name(chosen[i].pass);
  }
}

// A convolution with its ReLU (the graph's fusion): the bits of the two ops, a NaN the input
// spreads included. oneDNN 2.6's eltwise ReLU post-op fails this (it computes max(x, 0): NaN
// becomes 0, hiding a diverged layer), which is why the CPU does not use it.
TEST(CpuConvPlan, AConvolutionWithItsReluPassesNaNAsTheTwoOps) {
  CpuBackend b({});
  ConvDesc d = layer();
  d.bias = true;
  const auto p = b.make_conv_plan(d);
  Rng rng(4);
  const auto drawn = [&](const Shape& s) {
    std::vector<float> v(static_cast<size_t>(s.numel()));
    for (float& x : v) x = rng.normal(0.f, 1.f);
    Tensor t = b.empty(s, DType::kF32, MemCategory::kActivations, "operand");
    b.copy_from_host(v.data(), t);
    return t;
  };
  Tensor x = drawn({4, 64, 16, 16}), w = drawn({128, 64, 3, 3}), bias = drawn({128});
  // A NaN in the input: the outputs it reaches stay NaN through the ReLU, as torch.relu's do.
  std::vector<float> xs(static_cast<size_t>(x.numel()));
  b.copy_to_host(x, xs.data());
  xs[5] = std::numeric_limits<float>::quiet_NaN();
  b.copy_from_host(xs.data(), x);
  Tensor fused = drawn({4, 128, 8, 8}), apart = drawn({4, 128, 8, 8});
  b.conv_relu_forward(*p, x, w, &bias, fused);
  b.conv_bias_forward(*p, x, w, bias, apart);
  b.relu_forward(apart, apart);
  std::vector<uint32_t> f(static_cast<size_t>(fused.numel())), a(f.size());
  b.copy_to_host(fused, f.data());
  b.copy_to_host(apart, a.data());
  EXPECT_EQ(f, a);  // bits: NaNs and signed zeros included
  EXPECT_GT(std::count(f.begin(), f.end(), 0u), 0);
  EXPECT_GT(
      std::count_if(f.begin(), f.end(), [](uint32_t v) { return (v & 0x7fffffffu) > 0x7f800000u; }),
      0);
}

// A limit of one image's columns (the least im2col runs in): each pass takes oneDNN where oneDNN
// fits it, and im2col otherwise.
TEST(CpuConvPlan, EveryPassKeepsTheWorkspaceLimit) {
  const ConvDesc d = layer();
  const size_t limit = Im2colConv::min_workspace_bytes(d);
  const auto onednn = plan(ConvAlgoChoice::kOnednn)->algorithms();
  const auto chosen = plan(ConvAlgoChoice::kHeuristic, limit)->algorithms();
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_LE(chosen[i].workspace_bytes, limit) << conv_pass_name(chosen[i].pass);
    const bool fits = onednn[i].workspace_bytes <= limit;
    if (starts_with(onednn[i].algorithm, "onednn ref")) continue;
    EXPECT_EQ(starts_with(chosen[i].algorithm, "onednn"), fits)
        << conv_pass_name(chosen[i].pass) << ": " << chosen[i].algorithm << ", onednn needs "
        << onednn[i].workspace_bytes;
  }
}

TEST(CpuConvPlan, ForcedAlgorithmThatDoesNotFitIsRefused) {
  const auto onednn = plan(ConvAlgoChoice::kOnednn)->algorithms();
  size_t most = 0;
  for (const auto& a : onednn) most = std::max(most, a.workspace_bytes);
  if (most > 0) {
    EXPECT_THROW(plan(ConvAlgoChoice::kOnednn, most - 1), InvalidArgument);
  }
  const size_t one_image = Im2colConv::min_workspace_bytes(layer());
  EXPECT_THROW(plan(ConvAlgoChoice::kIm2col, one_image - 1), InvalidArgument);
  EXPECT_NO_THROW(plan(ConvAlgoChoice::kIm2col, one_image));
}

// Autotuning times both and keeps one per pass; either gives the same convolution.
TEST(CpuConvPlan, AutotuneChoosesPerPassAndComputesTheSame) {
  const ConvDesc d = layer();
  std::vector<float> results[2];
  const ConvAlgoChoice how[2] = {ConvAlgoChoice::kAutotune, ConvAlgoChoice::kIm2col};
  for (int k = 0; k < 2; ++k) {
    BackendOptions o;
    o.conv_algo = how[k];
    CpuBackend b(o);
    auto p = b.make_conv_plan(d);
    for (const auto& a : p->algorithms()) {
      EXPECT_TRUE(starts_with(a.algorithm, "onednn") || starts_with(a.algorithm, "im2col"))
          << a.algorithm;
    }
    Rng rng(3);
    const Shape xs{d.batch, d.in_channels, d.height, d.width};
    const Shape ws{d.out_channels, d.in_channels, d.kernel_h, d.kernel_w};
    std::vector<float> xv(xs.numel()), wv(ws.numel());
    for (float& v : xv) v = rng.normal(0.f, 1.f);
    for (float& v : wv) v = rng.normal(0.f, 1.f);
    Tensor x = b.empty(xs, DType::kF32, MemCategory::kActivations, "x");
    Tensor w = b.empty(ws, DType::kF32, MemCategory::kWeights, "w");
    Tensor y = b.empty({d.batch, d.out_channels, d.out_h(), d.out_w()}, DType::kF32,
                       MemCategory::kActivations, "y");
    b.copy_from_host(xv.data(), x);
    b.copy_from_host(wv.data(), w);
    b.conv_forward(*p, x, w, y);
    results[k].resize(y.numel());
    b.copy_to_host(y, results[k].data());
  }
  // Each output sums K = 576 products of unit normals in two orders. Each order is within
  // K u sum|x w| of the exact sum (u = 2^-24; sum|x w| is about K * 2/pi = 367): 1.3e-2, so
  // they differ by at most twice that. (conv_reference_test checks each against float64.)
  const float bound = 2 * 576 * 0x1p-24f * 367;
  for (size_t i = 0; i < results[0].size(); ++i) {
    ASSERT_NEAR(results[0][i], results[1][i], bound) << i;
  }
}

// resnet18's layer1 convolution (3x3, stride 1, 64 channels) at 32x32 images, batch 2.
ConvDesc winograd_layer() {
  ConvDesc d;
  d.batch = 2, d.in_channels = d.out_channels = 64, d.height = d.width = 8;
  d.kernel_h = d.kernel_w = 3, d.stride_h = d.stride_w = 1, d.pad_h = d.pad_w = 1;
  return d;
}

// Whether this machine's oneDNN has a Winograd convolution (2.6 has one for AVX-512 cores only).
bool have_winograd() {
  BackendOptions o;
  o.conv_algo = ConvAlgoChoice::kWinograd;
  CpuBackend b(o);
  ConvDesc d = layer();
  d.stride_h = d.stride_w = 1, d.out_channels = d.in_channels;
  return b.make_conv_plan(d)->algorithms()[0].refused.empty();
}

std::vector<PassAlgorithm> algorithms(ConvAlgoChoice how, const ConvDesc& d,
                                      std::optional<size_t> limit = std::nullopt) {
  BackendOptions o;
  o.conv_algo = how;
  o.workspace_limit = limit;
  CpuBackend b(o);
  return b.make_conv_plan(d)->algorithms();
}

// Winograd runs every pass of a 3x3 stride-1 layer; a strided layer, which it cannot run, takes
// the heuristic's choice per pass and says why.
TEST(CpuConvPlan, WinogradRunsWhereOnednnHasItAndTheHeuristicElsewhere) {
  if (!have_winograd()) GTEST_SKIP() << "this machine's oneDNN has no Winograd";
  for (const PassAlgorithm& a : algorithms(ConvAlgoChoice::kWinograd, winograd_layer())) {
    EXPECT_EQ(a.arithmetic, ConvArithmetic::kWinogradF4x3) << a.algorithm;
    EXPECT_TRUE(starts_with(a.algorithm, "onednn jit_wino_4x3")) << a.algorithm;
    EXPECT_EQ(a.refused, "");
  }
  const auto heuristic = algorithms(ConvAlgoChoice::kHeuristic, layer());
  const auto forced = algorithms(ConvAlgoChoice::kWinograd, layer());
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(forced[i].algorithm, heuristic[i].algorithm);
    EXPECT_EQ(forced[i].arithmetic, ConvArithmetic::kProducts);
    EXPECT_NE(forced[i].refused.find("onednn has no winograd convolution for 3x3"),
              std::string::npos)
        << forced[i].refused;
  }
  for (const PassAlgorithm& a : heuristic) EXPECT_EQ(a.refused, "");
}

// A workspace limit below what Winograd needs is a refusal of that pass alone, naming its need.
TEST(CpuConvPlan, WinogradOverTheWorkspaceLimitTakesTheHeuristic) {
  if (!have_winograd()) GTEST_SKIP() << "this machine's oneDNN has no Winograd";
  const auto wino = algorithms(ConvAlgoChoice::kWinograd, winograd_layer());
  const auto fwd = wino[static_cast<int>(ConvPass::kForward)];
  ASSERT_GT(fwd.workspace_bytes, 0u);
  const auto limited =
      algorithms(ConvAlgoChoice::kWinograd, winograd_layer(), fwd.workspace_bytes - 1);
  const auto& f = limited[static_cast<int>(ConvPass::kForward)];
  EXPECT_EQ(f.arithmetic, ConvArithmetic::kProducts) << f.algorithm;
  EXPECT_LT(f.workspace_bytes, fwd.workspace_bytes);
  EXPECT_NE(f.refused.find("over --workspace-limit="), std::string::npos) << f.refused;
}

// The heuristic takes Winograd where each image holds four or more of its 4x4 output tiles, and
// oneDNN's direct convolution on smaller outputs or under a workspace limit Winograd exceeds.
TEST(CpuConvPlan, HeuristicTakesWinogradWhereItsTilesFill) {
  if (!have_winograd()) GTEST_SKIP() << "this machine's oneDNN has no Winograd";
  const auto eight = algorithms(ConvAlgoChoice::kHeuristic, winograd_layer());
  for (const PassAlgorithm& a : eight) {
    EXPECT_EQ(a.arithmetic, ConvArithmetic::kWinogradF4x3) << a.algorithm;
  }
  ConvDesc four = winograd_layer();
  four.height = four.width = 4;
  for (const PassAlgorithm& a : algorithms(ConvAlgoChoice::kHeuristic, four)) {
    EXPECT_EQ(a.arithmetic, ConvArithmetic::kProducts) << a.algorithm;
  }
  size_t least = eight[0].workspace_bytes;
  for (const PassAlgorithm& a : eight) least = std::min(least, a.workspace_bytes);
  const auto direct = algorithms(ConvAlgoChoice::kOnednn, winograd_layer());
  size_t most_direct = 0;
  for (const PassAlgorithm& a : direct) most_direct = std::max(most_direct, a.workspace_bytes);
  if (most_direct >= least) GTEST_SKIP() << "oneDNN's direct needs as much as its Winograd";
  for (const PassAlgorithm& a :
       algorithms(ConvAlgoChoice::kHeuristic, winograd_layer(), least - 1)) {
    EXPECT_EQ(a.arithmetic, ConvArithmetic::kProducts) << a.algorithm;
    EXPECT_EQ(a.refused, "") << "the heuristic names no algorithm to refuse";
  }
}

// auto is oneDNN's own choice: one of its primitives on every pass, refused nowhere.
TEST(CpuConvPlan, AutoIsOnednnsChoice) {
  for (const ConvDesc& d : {layer(), winograd_layer()}) {
    for (const PassAlgorithm& a : algorithms(ConvAlgoChoice::kAuto, d)) {
      EXPECT_TRUE(starts_with(a.algorithm, "onednn")) << a.algorithm;
      EXPECT_EQ(a.refused, "");
      EXPECT_EQ(a.arithmetic == ConvArithmetic::kWinogradF4x3,
                a.algorithm.find("wino") != std::string::npos);
    }
  }
}

TEST(CpuConvPlan, LimitThatNothingFitsNamesEachAlgorithmsNeed) {
  for (const auto& a : plan(ConvAlgoChoice::kOnednn)->algorithms()) {
    if (a.workspace_bytes <= 64) GTEST_SKIP() << "oneDNN's " << a.algorithm << " fits in 64 B";
  }
  try {
    plan(ConvAlgoChoice::kHeuristic, 64);
    FAIL() << "a 64-byte workspace limit was accepted";
  } catch (const InvalidArgument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--workspace-limit=64 B"), std::string::npos) << m;
    EXPECT_NE(m.find("im2col needs at least"), std::string::npos) << m;
    EXPECT_NE(m.find("onednn needs"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace dlb
