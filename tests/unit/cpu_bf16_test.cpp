// Native bf16 on the CPU: where oneDNN multiplies bf16 (AVX-512 BF16), a bf16 layer's convolution
// plan and its matrix products take the bf16 tensors as they are, add a convolution's bias before
// the one rounding, and say so (PassAlgorithm::products, Backend::matmul_arithmetic). On small
// integers every sum is exact in f32 and in bf16, so the native result must equal the f32 one
// bit for bit: a wrong layout, transpose, bias or scale cannot hide in rounding.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/backend/cpu/conv_onednn.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/matmul_onednn.h"
#include "runtime/backend/cpu/onednn_engine.h"
#include "runtime/core/error.h"
#include "runtime/core/half.h"
#include "runtime/core/rng.h"

namespace dlb {
namespace {

OpTypes types(DType t) {
  OpTypes o;
  o.math = t == DType::kF32 ? Precision::kFp32 : Precision::kBf16;
  o.data = o.params = t;
  return o;
}

// resnet18's 3x3 stride-1 layer shape, small, with a bias (as alexnet's and vgg16's have).
ConvDesc layer(DType t) {
  ConvDesc d;
  d.batch = 2, d.in_channels = 8, d.height = d.width = 8, d.out_channels = 16;
  d.kernel_h = d.kernel_w = 3, d.pad_h = d.pad_w = 1, d.bias = true;
  d.types = types(t);
  return d;
}

class CpuBf16 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu_multiplies_bf16()) GTEST_SKIP() << "this CPU has no AVX-512 BF16";
  }
  // Integers in [-1, 1] (exact in bf16; every sum below stays under 256, exact too).
  Tensor ints(const Shape& s, DType t, uint64_t seed) {
    Rng rng(seed);
    std::vector<float> v(static_cast<size_t>(s.numel()));
    for (float& x : v) x = static_cast<float>(static_cast<int>(rng.next_u64() % 3) - 1);
    Tensor f = b.empty(s, DType::kF32, MemCategory::kActivations, "f32");
    b.copy_from_host(v.data(), f);
    Tensor out = b.empty(s, t, MemCategory::kActivations, "operand");
    b.cast(f, out);
    return out;
  }
  Tensor zeros(const Shape& s, DType t) {
    Tensor z = b.empty(s, t, MemCategory::kActivations, "result");
    b.fill(z, 0.f);
    return z;
  }
  std::vector<float> floats(const Tensor& t) {
    Tensor f = b.empty(t.shape(), DType::kF32, MemCategory::kActivations, "f32");
    b.cast(t, f);
    std::vector<float> v(static_cast<size_t>(t.numel()));
    b.copy_to_host(f, v.data());
    return v;
  }
  CpuBackend b{{}};
};

// On every machine: a bf16 plan and a bf16 product are native exactly where the CPU says it has
// AVX-512 BF16 (/proc/cpuinfo), and compute on f32 copies elsewhere (where oneDNN would emulate
// bf16, or has only its reference loops).
TEST(CpuBf16Everywhere, NativeExactlyWhereTheCpuHasAvx512Bf16) {
  if (std::getenv("DNNL_MAX_CPU_ISA") || std::getenv("ONEDNN_MAX_CPU_ISA")) {
    GTEST_SKIP() << "oneDNN's instruction set is capped in this environment";
  }
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::stringstream text;
  text << cpuinfo.rdbuf();
  const bool flag = text.str().find(" avx512_bf16") != std::string::npos;
  if (cpuinfo) {
    EXPECT_EQ(cpu_multiplies_bf16(), flag);
  }
  CpuBackend b{{}};
  const DType want = cpu_multiplies_bf16() ? DType::kBF16 : DType::kF32;
  for (const PassAlgorithm& a : b.make_conv_plan(layer(DType::kBF16))->algorithms()) {
    EXPECT_EQ(a.products.operands, want) << a.algorithm;
  }
  EXPECT_EQ(b.matmul_arithmetic(types(DType::kBF16)).operands, want);
}

TEST_F(CpuBf16, ConvolutionPlanMultipliesBf16Natively) {
  for (const PassAlgorithm& a : b.make_conv_plan(layer(DType::kBF16))->algorithms()) {
    EXPECT_EQ(a.products.operands, DType::kBF16) << a.algorithm;
    EXPECT_TRUE(a.products.flushes_subnormals);
    EXPECT_NE(a.algorithm.find("bf16"), std::string::npos) << a.algorithm;
  }
  for (const PassAlgorithm& a : b.make_conv_plan(layer(DType::kF32))->algorithms()) {
    EXPECT_EQ(a.products.operands, DType::kF32) << a.algorithm;
    EXPECT_FALSE(a.products.flushes_subnormals);
  }
}

// Where oneDNN has AMX, its first choice for a bf16 backward-filter pass is AMX's kernels, which
// pay only over a long sum over the batch's output pixels (docs/cpu.md). The heuristic takes
// AMX's there; elsewhere f32 on f32 views of the bf16 tensors (Winograd's where it pays, else
// direct), then bf16 off AMX where f32's does not fit the workspace limit. The forward and
// backward-data passes stay native, and --conv-algo=onednn keeps oneDNN's first choice.
class CpuBf16Amx : public CpuBf16 {
 protected:
  void SetUp() override {
    CpuBf16::SetUp();
    if (!IsSkipped() && !cpu_has_amx()) GTEST_SKIP() << "oneDNN has no AMX kernels on this CPU";
  }
  // A 32-to-64-channel layer (AMX's tiles are 32 bf16 channels deep) with k x k kernels over
  // `batch` images of side x side pixels.
  static ConvDesc amx_layer(int64_t batch, int64_t side, int64_t k) {
    ConvDesc d = layer(DType::kBF16);
    d.batch = batch, d.height = d.width = side;
    d.in_channels = 32, d.out_channels = 64;
    d.kernel_h = d.kernel_w = k, d.pad_h = d.pad_w = k / 2;
    return d;
  }
  // Each pass's algorithm and its products' type under `choice`.
  static std::vector<std::pair<std::string, DType>> passes(const ConvDesc& d, ConvAlgoChoice choice,
                                                           std::optional<size_t> limit = {}) {
    BackendOptions o;
    o.conv_algo = choice;
    o.workspace_limit = limit;
    std::vector<std::pair<std::string, DType>> out;
    for (const PassAlgorithm& a : CpuBackend(o).make_conv_plan(d)->algorithms()) {
      out.emplace_back(a.algorithm, a.products.operands);
    }
    return out;  // forward, backward-data, backward-filter (kConvPasses)
  }
};

TEST_F(CpuBf16Amx, HeuristicRunsBackwardFilterOnAmxOnlyWhereItPays) {
  const ConvDesc long_sum = amx_layer(2, 8, 3);  // 3x3 at stride 1 over 2 x 8 x 8 = 128 pixels
  const OnednnConv first(long_sum, OnednnAlgorithm::kDirect, DType::kBF16);
  const std::string amx = first.algorithm(ConvPass::kBackwardFilter);
  if (amx.find("amx") == std::string::npos) {
    GTEST_SKIP() << "oneDNN's first choice here is not AMX's: " << amx;
  }
  const auto heuristic = passes(long_sum, ConvAlgoChoice::kHeuristic);
  EXPECT_EQ(heuristic[2], std::make_pair(amx, DType::kBF16));
  for (int i : {0, 1}) EXPECT_EQ(heuristic[i].second, DType::kBF16) << heuristic[i].first;

  // A 1x1 kernel over 2 x 4 x 4 = 32 pixels: f32's direct pass, the other two still native.
  const ConvDesc short_sum = amx_layer(2, 4, 1);
  const ConvDesc in_f32 = [&] {
    ConvDesc f = short_sum;
    f.types = types(DType::kF32);
    return f;
  }();
  const OnednnConv f32(in_f32, OnednnAlgorithm::kDirect, DType::kF32);
  const auto small = passes(short_sum, ConvAlgoChoice::kHeuristic);
  EXPECT_EQ(small[2], std::make_pair(f32.algorithm(ConvPass::kBackwardFilter), DType::kF32));
  for (int i : {0, 1}) EXPECT_EQ(small[i].second, DType::kBF16) << small[i].first;
  EXPECT_EQ(passes(short_sum, ConvAlgoChoice::kOnednn)[2].second, DType::kBF16);

  // A 3x3 kernel at stride 1 over one 8 x 8 image: too short for AMX; Winograd pays, in f32.
  const auto one_image = passes(amx_layer(1, 8, 3), ConvAlgoChoice::kHeuristic);
  EXPECT_NE(one_image[2].first.find("wino"), std::string::npos) << one_image[2].first;
  EXPECT_EQ(one_image[2].second, DType::kF32);
}

TEST_F(CpuBf16Amx, BackwardFilterOffAmxWhereF32DoesNotFitTheLimit) {
  int tried = 0;
  for (auto [batch, side, k] : {std::tuple{2, 4, 1}, {2, 4, 3}, {8, 16, 1}, {16, 8, 1}}) {
    const ConvDesc d = amx_layer(batch, side, k);
    const OnednnConv without(d, OnednnAlgorithm::kDirect, DType::kBF16, OnednnKernels::kWithoutAmx);
    for (ConvPass p : kConvPasses) {
      EXPECT_EQ(without.algorithm(p).find("amx"), std::string::npos) << without.algorithm(p);
    }
    ConvDesc in_f32 = d;
    in_f32.types = types(DType::kF32);
    const OnednnConv f32(in_f32, OnednnAlgorithm::kDirect, DType::kF32);
    const size_t other_bytes = without.workspace_bytes(ConvPass::kBackwardFilter);
    if (other_bytes >= f32.workspace_bytes(ConvPass::kBackwardFilter)) continue;
    ++tried;
    EXPECT_EQ(passes(d, ConvAlgoChoice::kHeuristic, other_bytes)[2],
              std::make_pair(without.algorithm(ConvPass::kBackwardFilter), DType::kBF16));
  }
  if (!tried) GTEST_SKIP() << "f32's backward-filter passes need no more workspace than bf16's";
}

// A backward-filter pass in f32 on f32 views of bf16 tensors gives the f32 plan's bits on exact
// values, and writes a bf16 gradient as the layer stores it.
TEST_F(CpuBf16Amx, BackwardFilterInF32EqualsF32OnExactValues) {
  ConvDesc d = amx_layer(2, 4, 1);
  d.bias = false;
  ConvDesc in_f32 = d;
  in_f32.types = types(DType::kF32);
  BackendOptions products;
  products.conv_algo = ConvAlgoChoice::kOnednn;
  const auto native = b.make_conv_plan(d);
  ASSERT_EQ(native->algorithms()[2].products.operands, DType::kF32);
  const auto f32 = CpuBackend(products).make_conv_plan(in_f32);
  const Shape xs{2, 32, 4, 4}, ws{64, 32, 1, 1}, ys{2, 64, 4, 4};
  const auto run = [&](const ConvPlan& plan, DType t) {
    Tensor x = ints(xs, t, 1), dy = ints(ys, t, 4), dw = zeros(ws, t);
    b.conv_backward_filter(plan, x, dy, dw);
    return floats(dw);
  };
  EXPECT_EQ(run(*native, DType::kBF16), run(*f32, DType::kF32));
}

// im2col computes on f32 views whatever the tensors hold.
TEST_F(CpuBf16, Im2colComputesOnF32Copies) {
  BackendOptions o;
  o.conv_algo = ConvAlgoChoice::kIm2col;
  CpuBackend im2col(o);
  for (const PassAlgorithm& a : im2col.make_conv_plan(layer(DType::kBF16))->algorithms()) {
    EXPECT_EQ(a.products.operands, DType::kF32) << a.algorithm;
  }
}

TEST_F(CpuBf16, ConvolutionPassesEqualF32OnesOnExactValues) {
  const ConvDesc d = layer(DType::kBF16);
  const Shape xs{2, 8, 8, 8}, ws{16, 8, 3, 3}, ys{2, 16, 8, 8};
  const auto native = b.make_conv_plan(d);
  BackendOptions products;  // sums of products in f32 (the heuristic's Winograd is not exact)
  products.conv_algo = ConvAlgoChoice::kOnednn;
  const auto f32 = CpuBackend(products).make_conv_plan(layer(DType::kF32));
  const auto run = [&](const ConvPlan& plan, DType t) {
    Tensor x = ints(xs, t, 1), w = ints(ws, t, 2), bias = ints({16}, t, 3), dy = ints(ys, t, 4);
    Tensor y = zeros(ys, t), dx = zeros(xs, t), dw = zeros(ws, t);
    b.conv_bias_forward(plan, x, w, bias, y);
    b.conv_backward_data(plan, dy, w, dx);
    b.conv_backward_filter(plan, x, dy, dw);
    return std::vector<std::vector<float>>{floats(y), floats(dx), floats(dw)};
  };
  EXPECT_EQ(run(*native, DType::kBF16), run(*f32, DType::kF32));
}

// The native plan adds the bias inside its primitive, and also runs without it (for a caller that
// adds it apart, as the Backend's composed conv_bias_forward does); tensors of another type than
// the plan's are a caller's error.
TEST_F(CpuBf16, NativeBiasPlanRunsWithoutItsBiasAndRefusesOtherTypes) {
  const auto plan = b.make_conv_plan(layer(DType::kBF16));
  Tensor x = ints({2, 8, 8, 8}, DType::kBF16, 1), w = ints({16, 8, 3, 3}, DType::kBF16, 2);
  Tensor bias = ints({16}, DType::kBF16, 3), zero = zeros({16}, DType::kBF16);
  Tensor y = zeros({2, 16, 8, 8}, DType::kBF16), y0 = zeros({2, 16, 8, 8}, DType::kBF16);
  b.conv_forward(*plan, x, w, y);
  b.conv_bias_forward(*plan, x, w, zero, y0);
  EXPECT_EQ(floats(y), floats(y0));
  Tensor wide = ints({2, 8, 8, 8}, DType::kF32, 1);
  EXPECT_THROW(b.conv_bias_forward(*plan, wide, w, bias, y), InvalidArgument);
  EXPECT_THROW(b.conv_forward(*plan, wide, w, y), InvalidArgument);
}

TEST_F(CpuBf16, MatmulEqualsF32OnExactValuesEveryTransposeAndScale) {
  const int64_t m = 5, n = 7, k = 33;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (auto [alpha, beta] : {std::pair{1.f, 0.f}, {2.f, 0.5f}}) {
        const auto run = [&](DType t) {
          Tensor a = ints(ta ? Shape{k, m} : Shape{m, k}, t, 5);
          Tensor c = ints(tb ? Shape{n, k} : Shape{k, n}, t, 6);
          Tensor y = ints({m, n}, t, 7);  // beta scales what it holds
          b.matmul(Precision::kFp32, ta, tb, alpha, a, c, beta, y);
          return floats(y);
        };
        EXPECT_EQ(run(DType::kBF16), run(DType::kF32))
            << "trans_a " << ta << " trans_b " << tb << " alpha " << alpha << " beta " << beta;
      }
    }
  }
}

// Every product the models' linear layers make (forward, backward-data, backward-weights) has a
// native primitive: none falls back to f32 copies where matmul_arithmetic says bf16.
TEST_F(CpuBf16, EveryLinearLayersProductIsNative) {
  for (auto [n, in, out] : {std::tuple<int64_t, int64_t, int64_t>{16, 512, 1000},
                            {8, 2048, 1000},
                            {4, 9216, 4096},
                            {4, 4096, 4096},
                            {2, 25088, 4096},
                            {16, 64, 10}}) {
    for (const MatrixProduct& p : {MatrixProduct{false, true, n, out, in, 1.f, 0.f},
                                   MatrixProduct{false, false, n, in, out, 1.f, 0.f},
                                   MatrixProduct{true, false, out, in, n, 1.f, 0.f}}) {
      EXPECT_NE(OnednnProduct::find(p, DType::kBF16), nullptr)
          << p.m << "x" << p.n << "x" << p.k << " trans " << p.trans_a << p.trans_b;
    }
  }
}

TEST_F(CpuBf16, MatmulArithmeticSaysWhatRuns) {
  const ProductArithmetic bf16 = b.matmul_arithmetic(types(DType::kBF16));
  EXPECT_EQ(bf16.operands, DType::kBF16);
  EXPECT_TRUE(bf16.flushes_subnormals);
  OpTypes f16 = types(DType::kF16);
  f16.math = Precision::kFp16;
  EXPECT_EQ(b.matmul_arithmetic(f16).operands, DType::kF32);
  EXPECT_EQ(b.matmul_arithmetic(types(DType::kF32)).operands, DType::kF32);
}

}  // namespace
}  // namespace dlb
