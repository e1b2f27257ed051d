// The op checker (runtime/check/): its instance texts parse strictly and round-trip; its float64
// references agree with direct loops written from the definitions; every pass of every op passes
// on the CPU backend and fails once one element is moved just past its bound; a backend that
// breaks one pass on purpose is caught; grad mode agrees with central differences.
#include "runtime/check/op_checker.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/delegating_backend.h"
#include "runtime/check/bounds.h"
#include "runtime/check/operands.h"
#include "runtime/check/perturbing_backend.h"
#include "runtime/check/reference.h"
#include "runtime/core/error.h"
#include "runtime/core/rng.h"

namespace dlb {
namespace {

// Small instances of every kind, with stride, padding, groups and overlapping windows.
const char* const kInstances[] = {
    "conv:shape=2x4x7x6,k=6,kernel=3,stride=2,pad=1,groups=2,bias=1",
    "conv:shape=1x3x9x9,k=4,kernel=5,stride=1,pad=2,groups=1,bias=0",
    "linear:shape=3x10,out=7",
    "linear:shape=20x9,out=5",  // above the direct loops' batch: dgemm
    "batch_norm:shape=2x3x4x5",
    "batch_norm:shape=6x4",
    "relu:shape=2x3x4x4",
    "max_pool:shape=2x3x7x7,kernel=3,stride=2,pad=1",
    "avg_pool:shape=1x2x6x5,kernel=3,stride=2,pad=1",
    "adaptive_avg_pool:shape=2x3x5x7,out=3x2",
    "dropout:shape=4x500,p=0.5",
    "add:shape=2x3x4x4",
    "softmax_cross_entropy:shape=3x11",
    "sgd:shape=1000,copy=1",
    "sgd:shape=70,copy=0",
    "loss_scale:shape=5000",
    // oneDNN's Winograd takes it (3x3, stride 1, one group, 16 channels): tiles cut by the edges
    "conv:shape=2x16x9x10,k=16,kernel=3,stride=1,pad=1,groups=1,bias=1",
};

std::string name_of(const ::testing::TestParamInfo<const char*>& info) {
  std::string s = info.param;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

class EveryOp : public ::testing::TestWithParam<const char*> {};

TEST_P(EveryOp, ItsTextRoundTrips) { EXPECT_EQ(parse_op_instance(GetParam()).spec(), GetParam()); }

// Each pass in each precision the CPU offers, with every convolution algorithm it names.
TEST_P(EveryOp, EveryPassIsWithinItsBoundsOnTheCpu) {
  const OpInstance op = parse_op_instance(GetParam());
  for (ConvAlgoChoice algo : named_conv_algorithms(BackendKind::kCpu)) {
    BackendOptions o;
    o.conv_algo = algo;
    CpuBackend cpu(o);
    for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
      // im2col+matmul takes bf16 layers and f32 ones' backward-filter passes: in fp16 it
      // repeats the heuristic's
      if (algo == ConvAlgoChoice::kMatmul && p == Precision::kFp16) continue;
      CheckConfig cfg;
      cfg.precision = p;
      for (const PassResult& r : check_instance(cpu, op, cfg)) {
        EXPECT_EQ(r.status, CheckStatus::kOk)
            << precision_name(p) << " " << check_pass_name(r.pass) << ": worst " << r.worst.tensor
            << "[" << r.worst.index << "] ratio " << r.worst.ratio << " " << r.message;
      }
    }
  }
}

// The planted element sits just past its bound (1.01 of it, on top of the element's own error,
// in the direction of that error): every compared output of every pass must fail.
TEST_P(EveryOp, EveryBoundFailsOnOneElementJustPastIt) {
  const OpInstance op = parse_op_instance(GetParam());
  BackendOptions winograd;
  winograd.conv_algo = ConvAlgoChoice::kWinograd;
  CpuBackend cpu{{}}, wino{winograd};
  for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
    for (CpuBackend* be : {&cpu, &wino}) {
      CheckConfig cfg;
      cfg.precision = p;
      cfg.planted_error = 1.01;
      for (const PassResult& r : check_instance(*be, op, cfg)) {
        if (r.pass == CheckPass::kFindNonFinite) continue;  // a flag, not a bound
        EXPECT_EQ(r.status, CheckStatus::kFail)
            << precision_name(p) << " " << check_pass_name(r.pass) << " on " << r.algorithm;
        EXPECT_GE(r.worst.ratio, 1.0);
      }
    }
  }
}

TEST_P(EveryOp, TheReferenceBackwardAgreesWithCentralDifferences) {
  const OpInstance op = parse_op_instance(GetParam());
  for (const PassResult& r : check_reference_gradients(op, 7)) {
    EXPECT_EQ(r.status, CheckStatus::kOk)
        << check_pass_name(r.pass) << ": " << r.worst.tensor << "[" << r.worst.index << "] "
        << r.worst.got << " vs " << r.worst.want << " tolerance " << r.worst.bound;
    EXPECT_GT(r.elements, 0) << check_pass_name(r.pass) << " checked nothing: " << r.message;
  }
}

INSTANTIATE_TEST_SUITE_P(OpChecker, EveryOp, ::testing::ValuesIn(kInstances), name_of);

TEST(OpChecker, TextsAreParsedStrictly) {
  const char* const bad[] = {
      "conv",                                                     // no fields
      "convolution:shape=1x1x1x1",                                // unknown op
      "conv:shape=2x4x7x6,k=6,kernel=3,stride=2,pad=1,groups=2",  // bias missing
      "conv:shape=2x4x7x6,k=6,kernel=3,stride=2,pad=1,groups=2,bias=1,bias=0",
      "conv:shape=2x4x7x6,k=6,kernel=3,stride=2,pad=1,groups=3,bias=1",  // groups
      "conv:shape=2x4x2x2,k=6,kernel=5,stride=1,pad=0,groups=1,bias=1",  // no output
      // nor here: (2 - 3) / 2 + 1 is 1 when the division truncates, 0 as PyTorch floors it
      "conv:shape=2x4x2x2,k=6,kernel=3,stride=2,pad=0,groups=1,bias=1",
      "conv:shape=2x4x7,k=6,kernel=3,stride=1,pad=1,groups=1,bias=1",  // rank
      "relu:shape=2x0x4x4",
      "relu:shape=2x-3x4x4",
      "relu:shape=100000x100000x1000",  // more than 2^31 elements
      "relu:shape=2x3x4x4,p=1",         // a field it does not have
      "dropout:shape=2x3,p=1.5",
      "dropout:shape=2x3,p=nan",
      "max_pool:shape=1x1x4x4,kernel=2,stride=1,pad=2",  // pad above half the kernel
      "batch_norm:shape=1x3x1x1",                        // one value per channel
      "linear:shape=2x3,out=",
      "sgd:shape=10,copy=2",
  };
  for (const char* s : bad) EXPECT_THROW(parse_op_instance(s), InvalidArgument) << s;
}

// The conv reference against the definition, summed directly: y[n,k,i,j] = Σ x·w over the window.
TEST(OpChecker, ConvReferenceIsTheDefinition) {
  const OpInstance op =
      parse_op_instance("conv:shape=2x4x5x7,k=6,kernel=3,stride=2,pad=1,groups=2,bias=0");
  const ConvDesc& d = op.conv;
  Rng rng(3);
  HostArray x(op.in), w(Shape{6, 2, 3, 3}), dy(op.out());
  for (HostArray* a : {&x, &w, &dy})
    for (double& v : a->v) v = rng.normal(0, 1);
  const Expected y = ref_conv_forward(d, x, w, nullptr, {});
  const Expected dx = ref_conv_backward_data(d, dy, w, {});
  const Expected dw = ref_conv_backward_filter(d, x, dy, {});
  HostArray y2(op.out()), dx2(op.in), dw2(w.shape);
  const int64_t oh = d.out_h(), ow = d.out_w();
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t k = 0; k < 6; ++k)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j)
          for (int64_t c = 0; c < 2; ++c)
            for (int64_t r = 0; r < 3; ++r)
              for (int64_t s = 0; s < 3; ++s) {
                const int64_t ih = i * 2 - 1 + r, iw = j * 2 - 1 + s, ch = (k / 3) * 2 + c;
                if (ih < 0 || ih >= 5 || iw < 0 || iw >= 7) continue;
                const size_t xi = ((n * 4 + ch) * 5 + ih) * 7 + iw,
                             wi = ((k * 2 + c) * 3 + r) * 3 + s;
                const size_t yi = ((n * 6 + k) * oh + i) * ow + j;
                y2.v[yi] += x.v[xi] * w.v[wi];
                dx2.v[xi] += dy.v[yi] * w.v[wi];
                dw2.v[wi] += dy.v[yi] * x.v[xi];
              }
  for (size_t i = 0; i < y2.v.size(); ++i) EXPECT_NEAR(y.want.v[i], y2.v[i], 1e-12) << i;
  for (size_t i = 0; i < dx2.v.size(); ++i) EXPECT_NEAR(dx.want.v[i], dx2.v[i], 1e-12) << i;
  for (size_t i = 0; i < dw2.v.size(); ++i) EXPECT_NEAR(dw.want.v[i], dw2.v[i], 1e-12) << i;
}

// A sum of K terms may be off by at most kC·sqrt(K)·u·Σ|terms| before it is stored.
TEST(OpChecker, AReductionsBoundIsTheProbabilisticOne) {
  EXPECT_DOUBLE_EQ(reduction_bound(100, 3.0, 0x1p-24, 0, 0), kC * 10 * 0x1p-24 * 3.0);
  EXPECT_DOUBLE_EQ(unit_roundoff(DType::kBF16), 0x1p-8);
  EXPECT_DOUBLE_EQ(unit_roundoff(DType::kF16), 0x1p-11);
  EXPECT_DOUBLE_EQ(math_roundoff(Precision::kTf32), 0x1p-24);  // f32 accumulates
  EXPECT_DOUBLE_EQ(input_roundoff(Precision::kTf32), 0x1p-9);  // inputs truncated to 10 bits
  EXPECT_DOUBLE_EQ(input_roundoff(Precision::kFp32), 0.0);
  EXPECT_DOUBLE_EQ(math_roundoff(Precision::kBf16), 0x1p-24);
  EXPECT_DOUBLE_EQ(underflow_roundoff(DType::kF16), 0x1p-25);
}

// A backend that moves one element of one pass's output by 1% is caught on that pass only.
// A realistic defect, not one planted at the bound: a convolution that skips one of its 64 input
// channels (9 of 576 terms) stands outside the bound on most elements in every precision, tf32's
// too (whose bound allows for each input's rounding to 10 bits).
TEST(OpChecker, AConvolutionMissingAnInputChannelFailsInEveryPrecision) {
  const OpInstance op =
      parse_op_instance("conv:shape=2x64x8x8,k=16,kernel=3,stride=1,pad=1,groups=1,bias=0");
  Rng rng(11);
  HostArray x(op.in), w(Shape{16, 64, 3, 3});
  for (HostArray* a : {&x, &w})
    for (double& v : a->v) v = rng.uniform(-1.7f, 1.7f);
  HostArray missing = x;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t i = 0; i < 64; ++i)
      missing.v[static_cast<size_t>(n * 64 * 64 + i)] = 0;  // channel 0
  for (Precision p : kPrecisions) {
    const PrecisionPolicy pol = PrecisionPolicy::for_precision(p);
    const Arithmetic a{math_roundoff(p), input_roundoff(p), unit_roundoff(DType::kF32),
                       unit_roundoff(pol.activations)};
    const Expected want = ref_conv_forward(op.conv, x, w, nullptr, a);
    HostArray got = ref_conv_forward(op.conv, missing, w, nullptr, a).want;
    round_to(got, pol.activations);
    int64_t outside = 0;
    for (size_t i = 0; i < got.v.size(); ++i) {
      const double b = stored_bound(want.bound[i], want.want.v[i], pol.activations);
      outside += std::fabs(got.v[i] - want.want.v[i]) > b;
    }
    EXPECT_GT(outside, got.numel() / 2)
        << precision_name(p) << ": " << outside << " of " << got.numel();
  }
}

TEST(OpChecker, ABrokenPassIsCaught) {
  const struct {
    const char* target;
    const char* instance;
    CheckPass pass;
  } cases[] = {
      {"conv.forward", kInstances[0], CheckPass::kForward},
      {"conv.backward_data", kInstances[0], CheckPass::kBackwardData},
      {"conv.backward_weights", kInstances[1], CheckPass::kBackwardWeights},
      {"linear.forward", kInstances[2], CheckPass::kForward},
      {"batch_norm.forward", kInstances[4], CheckPass::kForward},
      {"batch_norm.backward", kInstances[4], CheckPass::kBackward},
      {"max_pool.backward_data", kInstances[7], CheckPass::kBackwardData},
      {"sgd.update", kInstances[13], CheckPass::kUpdate},
  };
  // The CPU fuses batch norm with its ReLU: the fused pass runs the broken op too.
  const auto runs = [](CheckPass pass, CheckPass target) {
    return pass == target || (target == CheckPass::kForward && pass == CheckPass::kForwardRelu) ||
           (target == CheckPass::kBackward && pass == CheckPass::kBackwardRelu);
  };
  for (const auto& c : cases) {
    PerturbingBackend broken(std::make_unique<CpuBackend>(BackendOptions{}), c.target);
    for (const PassResult& r : check_instance(broken, parse_op_instance(c.instance), {})) {
      EXPECT_EQ(r.status, runs(r.pass, c.pass) ? CheckStatus::kFail : CheckStatus::kOk)
          << c.target << ": " << check_pass_name(r.pass);
    }
  }
  EXPECT_THROW(PerturbingBackend(std::make_unique<CpuBackend>(BackendOptions{}), "conv.sideways"),
               InvalidArgument);
}

// A backend whose grouped update is its own (as the CUDA backend's one launch is): the perturbing
// backend forwards the group to it and breaks what it wrote.
class GroupedSgd final : public DelegatingBackend {
 public:
  void sgd_update_group(const SgdConfig& c, const std::vector<SgdParamRef>& group,
                        const Tensor* scaler) override {
    ++groups;
    Backend::sgd_update_group(c, group, scaler);
  }
  int groups = 0;
};

TEST(OpChecker, ThePerturbingBackendBreaksTheInnerBackendsGroupedUpdate) {
  auto inner = std::make_unique<GroupedSgd>();
  const GroupedSgd& grouped = *inner;
  PerturbingBackend broken(std::move(inner), "sgd.update");
  for (const PassResult& r : check_instance(broken, parse_op_instance(kInstances[13]), {})) {
    EXPECT_EQ(r.status, CheckStatus::kFail) << check_pass_name(r.pass);
  }
  EXPECT_GT(grouped.groups, 0);
}

TEST(OpChecker, APrecisionTheBackendLacksIsUnsupportedNotFailed) {
  CpuBackend cpu{{}};
  CheckConfig cfg;
  cfg.precision = Precision::kTf32;
  for (const PassResult& r : check_instance(cpu, parse_op_instance(kInstances[0]), cfg)) {
    EXPECT_EQ(r.status, CheckStatus::kUnsupported);
    EXPECT_NE(r.message.find("tf32"), std::string::npos) << r.message;
  }
}

}  // namespace
}  // namespace dlb
