// im2col+matmul (conv_matmul.h): a native bf16 layer's convolution as one oneDNN matrix product
// over the batch, on channels-last tensors, and the backward-filter pass of a bf16 or f32 layer
// the same way on NCHW ones. On small integers every sum is
// exact in f32 and in bf16, so each pass must equal oneDNN's f32 convolution bit for bit: a wrong
// window, padding, stride, transpose, weight layout or bias cannot hide in rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/onednn_engine.h"
#include "runtime/core/error.h"
#include "runtime/core/rng.h"

namespace dlb {
namespace {

struct Case {
  int64_t batch, in, out, side, kernel, stride, pad;
  bool bias;
};

// The layer as a bf16 run on a CPU with AMX stores it: channels-last activations, weights and
// their gradient in oneDNN's blocks where the channels fill them (KRSC otherwise).
ConvDesc layer(const Case& c, DType t, Layout layout, const Backend& b) {
  ConvDesc d;
  d.batch = c.batch, d.in_channels = c.in, d.out_channels = c.out;
  d.height = d.width = c.side;
  d.kernel_h = d.kernel_w = c.kernel, d.stride_h = d.stride_w = c.stride;
  d.pad_h = d.pad_w = c.pad, d.bias = c.bias;
  d.types = OpTypes::of(
      PrecisionPolicy::for_precision(t == DType::kF32 ? Precision::kFp32 : Precision::kBf16));
  d.layout = layout;
  describe_weights_as_trained(b, t != DType::kF32, d);
  return d;
}

BackendOptions choosing(ConvAlgoChoice c) {
  BackendOptions o;
  o.conv_algo = c;
  return o;
}

// Each test says what it needs: a CPU that multiplies bf16 natively (AVX-512 BF16, or AMX) for
// bf16 layers; AMX, or no AMX, for the heuristic's rule of each; AVX-512 for f32's rule. CTest runs
// these tests a second time with oneDNN held below AMX (ONEDNN_MAX_CPU_ISA, tests/CMakeLists.txt),
// so a host with AMX checks the rules without it too.
class CpuConvMatmul : public ::testing::Test {
 protected:
  static bool skip_without_bf16() { return !cpu_multiplies_bf16(); }
  // Whether each pass (forward, backward data, backward filter) of the heuristic's plan for each
  // layer, stored as `t` and `layout`, runs im2col+matmul: as each row expects.
  void expect_matmul_passes(DType t, Layout layout,
                            std::initializer_list<std::pair<Case, std::vector<bool>>> rows) {
    for (const auto& [c, want] : rows) {
      std::vector<bool> got;
      for (const PassAlgorithm& a : b.make_conv_plan(layer(c, t, layout, b))->algorithms()) {
        got.push_back(a.algorithm.rfind("im2col+matmul", 0) == 0);
      }
      EXPECT_EQ(got, want) << c.batch << "x" << c.in << "x" << c.side << "x" << c.side << " to "
                           << c.out << ", kernel " << c.kernel << ", stride " << c.stride;
    }
  }
  // Integers in [-1, 1] of type `t`, stored in `layout`.
  Tensor ints(const Shape& s, DType t, Layout layout, uint64_t seed) {
    Rng rng(seed);
    std::vector<float> v(static_cast<size_t>(s.numel()));
    for (float& x : v) x = static_cast<float>(static_cast<int>(rng.next_u64() % 3) - 1);
    Tensor f = b.empty(s, DType::kF32, MemCategory::kActivations, "f32");
    b.copy_from_host(v.data(), f);
    Tensor out = b.empty(s, t, MemCategory::kActivations, "operand", layout);
    b.cast(f, out);
    return out;
  }
  std::vector<float> floats(const Tensor& t) {
    Tensor f = b.empty(t.shape(), DType::kF32, MemCategory::kActivations, "f32");
    b.cast(t, f);
    std::vector<float> v(static_cast<size_t>(t.numel()));
    b.copy_to_host(f, v.data());
    return v;
  }
  // y (with the bias, if any), dx and dw of plan `plan` for layer `d`, from the same integers.
  std::vector<std::vector<float>> passes(const ConvPlan& plan, const ConvDesc& d) {
    const DType t = d.types.data;
    const Shape xs{d.batch, d.in_channels, d.height, d.width};
    const Shape ws{d.out_channels, d.in_channels, d.kernel_h, d.kernel_w};
    const Shape ys{d.batch, d.out_channels, d.out_h(), d.out_w()};
    const auto as_stored = [&](Layout l) { return l == Layout::kNCHW ? d.layout : l; };
    Tensor x = ints(xs, t, d.layout, 1), dy = ints(ys, t, d.layout, 4);
    Tensor w = ints(ws, t, as_stored(d.weight_layout), 2), bias = ints({d.out_channels}, t, {}, 3);
    Tensor y = ints(ys, t, d.layout, 5), dx = ints(xs, t, d.layout, 6);
    Tensor dw = ints(ws, t, as_stored(d.grad_layout), 7);
    if (d.bias) {
      b.conv_bias_forward(plan, x, w, bias, y);
    } else {
      b.conv_forward(plan, x, w, y);
    }
    b.conv_backward_data(plan, dy, w, dx);
    b.conv_backward_filter(plan, x, dy, dw);
    return {floats(y), floats(dx), floats(dw)};
  }
  CpuBackend b{{}};
};

// Every pass, on windows with padding, strides of 1 and 2, 1x1 kernels that read x as the columns
// and ones that gather it, the stem's 7x7 over 3 channels (KRSC weights, which oneDNN does not
// block), a 2x2 output, and a bias.
TEST_F(CpuConvMatmul, PassesEqualOnednnF32OnExactValues) {
  if (skip_without_bf16()) GTEST_SKIP() << "im2col+matmul multiplies bf16 natively";
  const Case cases[] = {{2, 16, 32, 8, 3, 1, 1, true},  {2, 16, 32, 7, 3, 2, 1, false},
                        {2, 32, 16, 4, 1, 1, 0, false}, {2, 32, 64, 5, 1, 2, 0, false},
                        {2, 3, 16, 9, 7, 2, 3, false},  {3, 32, 32, 2, 3, 1, 1, true}};
  CpuBackend matmul(choosing(ConvAlgoChoice::kMatmul)), f32(choosing(ConvAlgoChoice::kOnednn));
  for (const Case& c : cases) {
    const ConvDesc d = layer(c, DType::kBF16, Layout::kNHWC, matmul);
    const auto plan = matmul.make_conv_plan(d);
    for (const PassAlgorithm& a : plan->algorithms()) {
      EXPECT_EQ(a.algorithm.rfind("im2col+matmul", 0), 0u) << a.algorithm;
      EXPECT_EQ(a.products.operands, DType::kBF16);
      EXPECT_TRUE(a.refused.empty()) << a.refused;
    }
    const ConvDesc reference = layer(c, DType::kF32, Layout::kNCHW, f32);
    const auto want = passes(*f32.make_conv_plan(reference), reference);
    EXPECT_EQ(passes(*plan, d), want) << conv_shape_text(d);
    // The backward-filter pass of NCHW layers, f32 and bf16 (their other passes take the
    // heuristic's).
    for (const DType t : {DType::kF32, DType::kBF16}) {
      const ConvDesc nchw = layer(c, t, Layout::kNCHW, matmul);
      const auto nchw_plan = matmul.make_conv_plan(nchw);
      EXPECT_EQ(nchw_plan->algorithms()[2].algorithm.rfind("im2col+matmul", 0), 0u);
      EXPECT_EQ(passes(*nchw_plan, nchw)[2], want[2])
          << conv_shape_text(d) << " NCHW in " << dtype_name(t);
    }
  }
}

// The heuristic's rule on a CPU with AMX (conv.cpp's matmul_pays), on channels-last bf16 layers:
// forward and backward data on outputs of at most 2x2; backward filter for 1x1 kernels to 16
// pixels wide and 3x3 ones to 8.
TEST_F(CpuConvMatmul, HeuristicTakesMatmulWhereItPaysWithAmx) {
  if (skip_without_bf16()) GTEST_SKIP() << "im2col+matmul multiplies bf16 natively";
  if (!cpu_has_amx()) GTEST_SKIP() << "the rule for CPUs with AMX";
  expect_matmul_passes(DType::kBF16, Layout::kNHWC,
                       {{{4, 32, 32, 2, 3, 1, 1, false}, {true, true, true}},
                        {{4, 32, 32, 4, 3, 1, 1, false}, {false, false, true}},
                        {{2, 32, 32, 16, 3, 1, 1, false}, {false, false, false}},
                        {{2, 32, 64, 16, 1, 1, 0, false}, {false, false, true}},
                        {{1, 32, 64, 32, 1, 1, 0, false}, {false, false, false}}});
}

// Without AMX, bf16 runs are NCHW (CpuBackend::activation_layout), and the heuristic takes
// im2col+matmul for the backward-filter pass of 1x1 and 3x3 layers on outputs of at most 4x4
// (conv.cpp's nchw_bf16_matmul_pays).
TEST_F(CpuConvMatmul, HeuristicTakesNchwBf16MatmulWhereItPaysWithoutAmx) {
  if (skip_without_bf16()) GTEST_SKIP() << "im2col+matmul multiplies bf16 natively";
  if (cpu_has_amx()) GTEST_SKIP() << "the rule for CPUs without AMX";
  ASSERT_EQ(b.activation_layout(OpTypes::of(PrecisionPolicy::for_precision(Precision::kBf16))),
            Layout::kNCHW);
  expect_matmul_passes(DType::kBF16, Layout::kNCHW,
                       {{{4, 32, 32, 2, 3, 1, 1, false}, {false, false, true}},
                        {{4, 32, 32, 4, 3, 1, 1, false}, {false, false, true}},
                        {{4, 32, 64, 8, 3, 2, 1, false}, {false, false, true}},
                        {{4, 32, 64, 4, 1, 1, 0, false}, {false, false, true}},
                        {{4, 32, 32, 8, 3, 1, 1, false}, {false, false, false}},
                        {{4, 32, 64, 8, 1, 1, 0, false}, {false, false, false}},
                        {{4, 3, 16, 8, 7, 2, 3, false}, {false, false, false}}});
}

// On a CPU with AVX-512, an f32 layer (NCHW) takes im2col+matmul for the backward-filter pass of
// 3x3 layers with 512 output channels on 2x2 outputs (conv.cpp's f32_matmul_pays).
TEST_F(CpuConvMatmul, HeuristicTakesF32MatmulWhereItPays) {
  if (!cpu_blocks_channels_by_16()) GTEST_SKIP() << "the rule for CPUs with AVX-512";
  expect_matmul_passes(DType::kF32, Layout::kNCHW,
                       {{{4, 32, 512, 2, 3, 1, 1, false}, {false, false, true}},
                        {{4, 32, 512, 4, 3, 2, 1, false}, {false, false, true}},
                        {{4, 32, 256, 2, 3, 1, 1, false}, {false, false, false}},
                        {{4, 32, 512, 1, 3, 1, 1, false}, {false, false, false}},
                        {{4, 32, 512, 4, 3, 1, 1, false}, {false, false, false}},
                        {{4, 32, 512, 2, 1, 1, 0, false}, {false, false, false}}});
}

// im2col+matmul takes channels-last bf16 layers, and the backward-filter pass of NCHW f32 and
// bf16 ones: --conv-algo=matmul gives every other pass the heuristic's algorithm and says why,
// and --conv-algo=onednn never takes it.
TEST_F(CpuConvMatmul, NamedOnlyWhereItRuns) {
  if (skip_without_bf16()) GTEST_SKIP() << "im2col+matmul multiplies bf16 natively";
  CpuBackend matmul(choosing(ConvAlgoChoice::kMatmul));
  const Case c{2, 16, 32, 4, 3, 1, 1, false};
  for (const PassAlgorithm& a :
       matmul.make_conv_plan(layer(c, DType::kF32, Layout::kNHWC, matmul))->algorithms()) {
    EXPECT_EQ(a.algorithm.find("matmul"), std::string::npos) << a.algorithm;
    EXPECT_NE(a.refused.find("im2col+matmul takes"), std::string::npos) << a.refused;
  }
  for (const DType t : {DType::kF32, DType::kBF16}) {
    const auto nchw = matmul.make_conv_plan(layer(c, t, Layout::kNCHW, matmul));
    for (const PassAlgorithm& a : nchw->algorithms()) {
      const bool filter = a.pass == ConvPass::kBackwardFilter;
      EXPECT_EQ(a.algorithm.rfind("im2col+matmul", 0) == 0, filter) << a.algorithm;
      EXPECT_EQ(a.refused.find("only its backward-filter pass") != std::string::npos, !filter)
          << a.refused;
    }
  }
  CpuBackend onednn(choosing(ConvAlgoChoice::kOnednn));
  const ConvDesc small = layer({4, 32, 32, 2, 3, 1, 1, false}, DType::kBF16, Layout::kNHWC, onednn);
  for (const PassAlgorithm& a : onednn.make_conv_plan(small)->algorithms()) {
    EXPECT_EQ(a.algorithm.find("matmul"), std::string::npos) << a.algorithm;
  }
}

// Under a --workspace-limit that oneDNN's direct forward pass fits and im2col+matmul's does not
// (its columns, and a copy of the weights as KRSC rows), the heuristic takes another algorithm,
// and a named matmul says what it needs.
TEST_F(CpuConvMatmul, KeepsWithinTheWorkspaceLimit) {
  if (skip_without_bf16()) GTEST_SKIP() << "im2col+matmul multiplies bf16 natively";
  if (!cpu_has_amx()) GTEST_SKIP() << "channels-last bf16 runs, and their alternatives, need AMX";
  const Case c{4, 32, 32, 2, 3, 1, 1, false};
  CpuBackend onednn(choosing(ConvAlgoChoice::kOnednn)), matmul(choosing(ConvAlgoChoice::kMatmul));
  const auto needs = [&](CpuBackend& be) {
    std::vector<size_t> out;
    for (const PassAlgorithm& a :
         be.make_conv_plan(layer(c, DType::kBF16, Layout::kNHWC, be))->algorithms()) {
      out.push_back(a.workspace_bytes);
    }
    return out;
  };
  const std::vector<size_t> direct = needs(onednn), columns = needs(matmul);
  // What oneDNN's forward and backward-data passes need (its AMX backward-filter pass needs more
  // than any of matmul's here; that pass then takes matmul's, or f32's).
  const size_t limit = std::max(direct[0], direct[1]);
  int over = 0;
  for (ConvAlgoChoice choice : {ConvAlgoChoice::kHeuristic, ConvAlgoChoice::kMatmul}) {
    BackendOptions o = choosing(choice);
    o.workspace_limit = limit;
    CpuBackend limited(o);
    const auto passes =
        limited.make_conv_plan(layer(c, DType::kBF16, Layout::kNHWC, limited))->algorithms();
    for (size_t p = 0; p < passes.size(); ++p) {
      EXPECT_LE(passes[p].workspace_bytes, limit) << passes[p].algorithm;
      if (columns[p] <= limit) continue;
      ++over;
      EXPECT_EQ(passes[p].algorithm.find("matmul"), std::string::npos) << passes[p].algorithm;
      if (choice == ConvAlgoChoice::kMatmul) {
        EXPECT_NE(passes[p].refused.find("over --workspace-limit"), std::string::npos)
            << passes[p].refused;
      }
    }
  }
  EXPECT_GT(over, 0) << "im2col+matmul fits where oneDNN's direct passes do";
}

}  // namespace
}  // namespace dlb
