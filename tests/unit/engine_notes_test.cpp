// What an engine declares is recorded and acted on: the run's summary of its convolution passes'
// engines (runtime/train/engines.h) names every tf32 or 16-bit pass without tensor cores, and the
// op checker judges a pass on an engine that reduces in 16 bits by a 16-bit reduction's bound
// (runtime/check/bounds.h's reduction_roundoff), derived, not widened: a backend that really
// accumulates a bf16 convolution in bf16 passes it, fails the f32 bound, and fails once one
// element stands just past the 16-bit bound.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <vector>

#include "runtime/backend/delegating_backend.h"
#include "runtime/check/bounds.h"
#include "runtime/check/op_checker.h"
#include "runtime/core/error.h"
#include "runtime/core/half.h"
#include "runtime/train/engines.h"
#include "suites/harness/core/json_schema.h"
#include "suites/harness/core/suite.h"

namespace dlb {
namespace {

PassAlgorithm engine(ConvPass pass, const char* name, EngineNotes notes) {
  PassAlgorithm a;
  a.pass = pass;
  a.algorithm = name;
  a.notes = notes;
  return a;
}

EngineNotes tensor_cores() {
  EngineNotes n;
  n.tensor_core = true;
  return n;
}

EngineNotes generic_fallback() {
  EngineNotes n;
  n.fallback = true;
  return n;
}

TEST(Engines, APassWithoutTensorCoresIsNamedWhereItsPrecisionWantsThem) {
  const std::vector<EngineUse> uses = {
      {"conv1", engine(ConvPass::kForward, "eng28", tensor_cores())},
      {"conv1", engine(ConvPass::kBackwardData, "eng0", generic_fallback())},
      {"conv1", engine(ConvPass::kBackwardFilter, "eng1", EngineNotes{})}};
  for (Precision p : {Precision::kTf32, Precision::kFp16, Precision::kBf16}) {
    const EngineSummary s = summarize_engines(uses, p);
    EXPECT_EQ(s.passes, 3);
    EXPECT_EQ(s.tensor_core, 1);
    EXPECT_EQ(s.fallback, 1);
    ASSERT_EQ(s.without_tensor_cores.size(), 2u) << precision_name(p);
    EXPECT_EQ(s.without_tensor_cores[0], "conv1 backward_data: eng0 (fallback)");
    EXPECT_EQ(s.without_tensor_cores[1], "conv1 backward_filter: eng1");
  }
  // Strict fp32 asks for no tensor cores: none is missing.
  EXPECT_TRUE(summarize_engines(uses, Precision::kFp32).without_tensor_cores.empty());
}

TEST(Engines, ABackendThatDeclaresNothingIsNotCounted) {
  PassAlgorithm onednn;
  onednn.algorithm = "onednn jit:avx512_core";
  const EngineSummary s = summarize_engines({{"conv1", onednn}}, Precision::kBf16);
  EXPECT_EQ(s.passes, 0);
  EXPECT_TRUE(s.without_tensor_cores.empty());
  EXPECT_FALSE(lacks_tensor_cores(onednn, Precision::kBf16));
}

TEST(Engines, TheRecordListsAtMostItsLimitAndCountsThemAll) {
  std::vector<EngineUse> uses;
  for (int i = 0; i < 100; ++i) uses.push_back({"c", engine(ConvPass::kForward, "eng0", {})});
  const nlohmann::json j = engines_json(summarize_engines(uses, Precision::kFp16));
  EXPECT_EQ(j["without_tensor_cores"], 100);
  EXPECT_EQ(j["passes_without_tensor_cores"].size(), kListedPasses);
  EXPECT_EQ(engine_note_names(generic_fallback()), std::vector<std::string>{"fallback"});
  EXPECT_EQ(
      pass_algorithm_json(engine(ConvPass::kForward, "eng28", tensor_cores()))["engine_notes"],
      nlohmann::json::array({"tensor_core"}));
}

nlohmann::json schema_file(const std::string& name) {
  std::ifstream in(suites_dir() + "/schema/" + name);
  return nlohmann::json::parse(in);
}

PassAlgorithm refused(ConvPass pass, const char* why) {
  PassAlgorithm a;
  a.pass = pass;
  a.algorithm = "onednn jit:avx512_core";
  a.refused = why;
  return a;
}

// --conv-algo=winograd on a model where it runs some passes: counted, and the refusals named;
// where it runs none, the run is refused with each layer and why.
TEST(Engines, ANamedAlgorithmThatRunsNoPassIsRefusedWithTheLayersNamed) {
  PassAlgorithm wino;
  wino.algorithm = "onednn jit_wino_4x3:avx512_core";
  wino.arithmetic = ConvArithmetic::kWinogradF4x3;
  const std::vector<EngineUse> some = {{"conv1", refused(ConvPass::kForward, "7x7")},
                                       {"layer1.0.conv1", wino}};
  const ConvPassSummary s = summarize_conv_passes(some);
  EXPECT_EQ(s.passes, 2);
  EXPECT_EQ(s.winograd, 1);
  EXPECT_EQ(s.refused, std::vector<std::string>{"conv1 forward: 7x7"});
  EXPECT_NO_THROW(require_named_algorithm_ran(s, "winograd"));
  const ConvPassSummary none =
      summarize_conv_passes({{"conv1", refused(ConvPass::kForward, "7x7")},
                             {"fc0", refused(ConvPass::kBackwardData, "stride 2")}});
  try {
    require_named_algorithm_ran(none, "winograd");
    FAIL() << "a run whose every pass refused winograd was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(),
                 "--conv-algo=winograd runs none of the model's 2 convolution passes: conv1 "
                 "forward: 7x7; fc0 backward_data: stride 2");
  }
  EXPECT_NO_THROW(require_named_algorithm_ran(summarize_conv_passes({}), "winograd"));
  const nlohmann::json def =
      schema_file("result.schema.json")["properties"]["metrics"]["properties"]["convolutions"];
  ASSERT_TRUE(def.is_object());
  const std::vector<std::string> errors = validate_json(conv_passes_json(s), def);
  EXPECT_TRUE(errors.empty()) << errors.front();
  EXPECT_EQ(pass_algorithm_json(some[0].algorithm)["refused"], "7x7");
  EXPECT_EQ(pass_algorithm_json(wino)["arithmetic"], "winograd_f4x3");
}

// metrics.arithmetic: native when every product reads the 16-bit data, emulated when none does,
// partly native between; f32 data is f32. As written, it is what the schema defines.
TEST(Engines, ArithmeticSaysWhetherTheProductsReadTheSixteenBitData) {
  PassAlgorithm native, copies;
  native.products = {DType::kBF16, true};
  const std::vector<EngineUse> both = {{"conv1", native}, {"conv2", copies}};
  const std::vector<EngineUse> all = {{"conv1", native}, {"conv2", native}};
  EXPECT_EQ(arithmetic_verdict(summarize_arithmetic(all, DType::kBF16, DType::kBF16)), "native");
  EXPECT_EQ(arithmetic_verdict(summarize_arithmetic(all, DType::kBF16, DType::kF32)),
            "partly native");
  EXPECT_EQ(arithmetic_verdict(summarize_arithmetic(both, DType::kBF16, DType::kBF16)),
            "partly native");
  EXPECT_EQ(arithmetic_verdict(summarize_arithmetic({{"c", copies}}, DType::kF16, DType::kF32)),
            "emulated");
  EXPECT_EQ(arithmetic_verdict(summarize_arithmetic({{"c", copies}}, DType::kF32, DType::kF32)),
            "f32");
  const ArithmeticSummary s = summarize_arithmetic(both, DType::kBF16, DType::kBF16);
  EXPECT_EQ(s.native_conv_passes, 1);
  EXPECT_EQ(arithmetic_line(s),
            "bf16 products: partly native (1 of 2 convolution passes, matmul native; "
            "metrics.arithmetic): the rest compute on f32 copies of the bf16 tensors");
  EXPECT_EQ(arithmetic_line(summarize_arithmetic(all, DType::kF32, DType::kF32)), "");
  const nlohmann::json def =
      schema_file("result.schema.json")["properties"]["metrics"]["properties"]["arithmetic"];
  ASSERT_TRUE(def.is_object());
  const std::vector<std::string> errors = validate_json(arithmetic_json(s), def);
  EXPECT_TRUE(errors.empty()) << errors.front();
  EXPECT_EQ(pass_algorithm_json(native)["operands"], "bf16");
}

// metrics.engines and check-ops' engine_notes, as written, are what the schemas define.
TEST(Engines, WhatIsWrittenIsWhatTheSchemasDefine) {
  std::vector<EngineUse> uses;
  for (int i = 0; i < 70; ++i) uses.push_back({"c", engine(ConvPass::kForward, "eng0", {})});
  const nlohmann::json def =
      schema_file("result.schema.json")["properties"]["metrics"]["properties"]["engines"];
  ASSERT_TRUE(def.is_object());
  const std::vector<std::string> errors =
      validate_json(engines_json(summarize_engines(uses, Precision::kBf16)), def);
  EXPECT_TRUE(errors.empty()) << errors.front();
  EngineNotes all;
  all.tensor_core = all.down_convert_inputs = all.reduced_precision_reduction = true;
  all.nondeterministic = all.fft = all.winograd = all.fallback = true;
  const nlohmann::json row = schema_file("check_ops.schema.json")["$defs"]["row"]["properties"];
  EXPECT_EQ(row["engine_notes"]["items"]["enum"].get<std::vector<std::string>>(),
            engine_note_names(all));
}

// An engine's class is read from its notes, FFT before Winograd before tensor cores; the class
// choices of --conv-algo name them, parse back, and are the cuda backend's alone.
TEST(Engines, AnEnginesClassIsWhatItsNotesDeclareFirst) {
  EngineNotes n;
  EXPECT_EQ(engine_class(n), EngineClass::kOther);
  n.tensor_core = true;
  EXPECT_EQ(engine_class(n), EngineClass::kTensorCore);
  n.winograd = true;  // a Winograd engine on tensor cores is a Winograd engine
  EXPECT_EQ(engine_class(n), EngineClass::kWinograd);
  n.fft = true;
  EXPECT_EQ(engine_class(n), EngineClass::kFft);
  EXPECT_EQ(pass_algorithm_json(engine(ConvPass::kForward, "eng1", n))["engine_class"], "fft");
  EXPECT_FALSE(pass_algorithm_json(PassAlgorithm{}).contains("engine_class"));
  for (ConvAlgoChoice c : kConvAlgoChoices) {
    EXPECT_EQ(parse_conv_algo_choice(conv_algo_choice_name(c)), c);
    const std::optional<EngineClass> k = restricted_class(c);
    if (k) {
      EXPECT_EQ(conv_algo_choice_name(c), "class:" + std::string(engine_class_name(*k)));
    }
  }
  for (EngineClass k : kEngineClasses) {
    EXPECT_TRUE(parse_conv_algo_choice("class:" + std::string(engine_class_name(k))));
  }
  EXPECT_FALSE(parse_conv_algo_choice("class:gemm"));
  EXPECT_FALSE(restricted_class(ConvAlgoChoice::kWinograd));
  BackendOptions o;
  o.conv_algo = ConvAlgoChoice::kClassWinograd;
  EXPECT_THROW(make_backend(BackendKind::kCpu, o), InvalidArgument);
  EXPECT_THROW(parse_named_conv_algorithms(BackendKind::kCpu, {"class:fft"}, "--algos"),
               InvalidArgument);
  EXPECT_EQ(parse_named_conv_algorithms(BackendKind::kCuda, {"class:other"}, "--algos"),
            std::vector<ConvAlgoChoice>{ConvAlgoChoice::kClassOther});
  EXPECT_EQ(named_conv_algorithms(BackendKind::kCuda).size(), 1 + std::size(kEngineClasses));
}

// A 16-bit reduction's unit roundoff is the data type's; f32 data always reduces in f32.
TEST(Bounds, AReducedPrecisionReductionRoundsInTheDataType) {
  EXPECT_DOUBLE_EQ(reduction_roundoff(Precision::kBf16, DType::kBF16, true), 0x1p-8);
  EXPECT_DOUBLE_EQ(reduction_roundoff(Precision::kFp16, DType::kF16, true), 0x1p-11);
  EXPECT_DOUBLE_EQ(reduction_roundoff(Precision::kBf16, DType::kBF16, false), 0x1p-24);
  EXPECT_DOUBLE_EQ(reduction_roundoff(Precision::kTf32, DType::kF32, true), 0x1p-24);
}

// A plan that declares the notes (and the arithmetic) it is given, over the CPU's plan.
class NotedPlan final : public ConvPlan {
 public:
  NotedPlan(std::unique_ptr<ConvPlan> inner, EngineNotes notes,
            ConvArithmetic arithmetic = ConvArithmetic::kProducts)
      : ConvPlan(inner->desc()), inner_(std::move(inner)), notes_(notes), arithmetic_(arithmetic) {}
  size_t workspace_bytes() const override { return inner_->workspace_bytes(); }
  std::vector<PassAlgorithm> algorithms() const override {
    std::vector<PassAlgorithm> out = inner_->algorithms();
    for (PassAlgorithm& a : out) {
      a.notes = notes_;
      a.arithmetic = arithmetic_;
    }
    return out;
  }

 private:
  std::unique_ptr<ConvPlan> inner_;
  EngineNotes notes_;
  ConvArithmetic arithmetic_;
};

// The CPU's arithmetic behind plans that declare cuDNN's FFT engine and its unstated transform.
class DeclaresFft final : public DelegatingBackend {
 public:
  std::unique_ptr<ConvPlan> make_conv_plan(const ConvDesc& d) override {
    EngineNotes fft;
    fft.fft = true;
    return std::make_unique<NotedPlan>(DelegatingBackend::make_conv_plan(d), fft,
                                       ConvArithmetic::kUnstatedTransform);
  }
};

// A pass on a transform whose points and tiles are not stated has no bound the checker can
// derive: it is reported unsupported, with the engine and its notes, and never judged (its
// result here, the CPU's sums of products, would have passed the products' bound).
TEST(Bounds, AnUnstatedTransformIsUnsupportedNotJudgedByAnotherBound) {
  DeclaresFft backend;
  CheckConfig cfg;
  const OpInstance op =
      parse_op_instance("conv:shape=2x8x6x6,k=4,kernel=3,stride=1,pad=1,groups=1,bias=0");
  const std::vector<PassResult> r = check_instance(backend, op, cfg);
  ASSERT_EQ(r.size(), 3u);
  for (const PassResult& p : r) {
    EXPECT_EQ(p.status, CheckStatus::kUnsupported) << p.message;
    EXPECT_NE(
        p.message.find("(notes: fft) computes by a transform whose points and tiles its library "
                       "does not state: the op checker has no bound derived for it"),
        std::string::npos)
        << p.message;
  }
}

// A convolution forward that accumulates in the data's 16-bit type, as an engine with cuDNN's
// REDUCED_PRECISION_REDUCTION note may: every partial sum is rounded to bf16 (NCHW, no groups,
// no bias). Its plans declare `notes`.
class SixteenBitReduction final : public DelegatingBackend {
 public:
  explicit SixteenBitReduction(EngineNotes notes) : notes_(notes) {}
  std::unique_ptr<ConvPlan> make_conv_plan(const ConvDesc& d) override {
    return std::make_unique<NotedPlan>(DelegatingBackend::make_conv_plan(d), notes_);
  }
  void conv_forward(const ConvPlan& p, const Tensor& x, const Tensor& w, Tensor& y) override {
    const ConvDesc& d = p.desc();
    const std::vector<float> xs = floats(x), ws = floats(w);
    std::vector<float> ys(static_cast<size_t>(y.numel()));
    const int64_t oh = d.out_h(), ow = d.out_w();
    for (int64_t n = 0; n < d.batch; ++n)
      for (int64_t k = 0; k < d.out_channels; ++k)
        for (int64_t i = 0; i < oh * ow; ++i) {
          float sum = 0;
          for (int64_t c = 0; c < d.in_channels; ++c)
            for (int64_t r = 0; r < d.kernel_h; ++r)
              for (int64_t s = 0; s < d.kernel_w; ++s) {
                const int64_t h = i / ow * d.stride_h - d.pad_h + r;
                const int64_t v = i % ow * d.stride_w - d.pad_w + s;
                if (h < 0 || h >= d.height || v < 0 || v >= d.width) continue;
                const float a =
                    xs[static_cast<size_t>(((n * d.in_channels + c) * d.height + h) * d.width + v)];
                const float b = ws[static_cast<size_t>(
                    ((k * d.in_channels + c) * d.kernel_h + r) * d.kernel_w + s)];
                sum = stored_value(sum + a * b, DType::kBF16);
              }
          ys[static_cast<size_t>((n * d.out_channels + k) * oh * ow + i)] = sum;
        }
    std::vector<uint16_t> stored(ys.size());
    floats_to_dtype(ys.data(), y.numel(), DType::kBF16, stored.data());
    copy_from_host(stored.data(), y);
  }

 private:
  std::vector<float> floats(const Tensor& t) {
    std::vector<uint16_t> raw(static_cast<size_t>(t.numel()));
    copy_to_host(t, raw.data());
    std::vector<float> out(raw.size());
    dtype_to_floats(raw.data(), t.numel(), DType::kBF16, out.data());
    return out;
  }
  EngineNotes notes_;
};

PassResult check_forward(EngineNotes notes, double planted_error) {
  SixteenBitReduction backend(notes);
  CheckConfig cfg;
  cfg.precision = Precision::kBf16;
  cfg.passes = {CheckPass::kForward};
  cfg.planted_error = planted_error;
  // K = 64 x 3 x 3 = 576 terms a sum.
  const OpInstance op =
      parse_op_instance("conv:shape=2x64x6x6,k=8,kernel=3,stride=1,pad=1,groups=1,bias=0");
  const std::vector<PassResult> r = check_instance(backend, op, cfg);
  EXPECT_EQ(r.size(), 1u);
  return r.empty() ? PassResult{} : r.front();
}

TEST(Bounds, ASixteenBitReductionPassesItsBoundAndNoTighterOne) {
  EngineNotes reduces;
  reduces.tensor_core = true;
  reduces.reduced_precision_reduction = true;
  const PassResult declared = check_forward(reduces, 0);
  EXPECT_EQ(declared.status, CheckStatus::kOk) << declared.worst.ratio << " " << declared.message;
  ASSERT_TRUE(declared.notes);
  EXPECT_TRUE(declared.notes->reduced_precision_reduction);
  // Judged as an f32 reduction (an engine that does not declare it), the same arithmetic fails:
  // the 16-bit bound is the one the result needs, not a looser one.
  const PassResult undeclared = check_forward(tensor_cores(), 0);
  EXPECT_EQ(undeclared.status, CheckStatus::kFail);
  EXPECT_GT(undeclared.worst.ratio, 10.0);
  // And one element just past the 16-bit bound fails it.
  const PassResult planted = check_forward(reduces, 1.01);
  EXPECT_EQ(planted.status, CheckStatus::kFail);
  EXPECT_GE(planted.worst.ratio, 1.0);
}

}  // namespace
}  // namespace dlb
