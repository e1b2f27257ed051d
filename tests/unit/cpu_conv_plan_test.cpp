// How the CPU convolution plan chooses its algorithm per pass: the heuristic takes oneDNN unless
// oneDNN has only its reference loops; the workspace limit is kept by every pass; a limit that no
// algorithm fits, or a forced algorithm that does not fit, is refused with both algorithms' needs.
#include <gtest/gtest.h>

#include <algorithm>

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
