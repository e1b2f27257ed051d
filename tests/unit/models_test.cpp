// The reference models against torchvision's published facts. The expected numbers are looked
// up from torchvision (sum of p.numel() over model.parameters(), and the "GFLOPS" column of its
// model table, which counts multiply-adds of conv and linear layers at 224x224).
#include <gtest/gtest.h>

#include <set>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/core/error.h"
#include "runtime/nn/layers/elementwise.h"
#include "runtime/train/executor.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

struct Expected {
  const char* model;
  int64_t params;
  double gmacs;  // torchvision's "GFLOPS"
};
void PrintTo(const Expected& e, std::ostream* os) {
  *os << e.model << " (" << e.params << " parameters, " << e.gmacs << " GMACs)";
}

class TorchvisionFacts : public ::testing::TestWithParam<Expected> {};

TEST_P(TorchvisionFacts, ParameterCountAndCost) {
  const Expected e = GetParam();
  const Graph g = build_model(e.model, ModelConfig{1, 224, 1000, {}});
  EXPECT_EQ(g.num_params(), e.params);
  EXPECT_NEAR(g.matmul_macs() / 1e9, e.gmacs, 0.006 * e.gmacs);
}

INSTANTIATE_TEST_SUITE_P(Models, TorchvisionFacts,
                         ::testing::Values(Expected{"alexnet", 61100840, 0.71},
                                           Expected{"vgg16", 138357544, 15.47},
                                           Expected{"resnet18", 11689512, 1.81},
                                           Expected{"resnet50", 25557032, 4.09},
                                           Expected{"resnet101", 44549160, 7.80}),
                         [](const auto& info) { return std::string(info.param.model); });

TEST(Models, ParameterCountDoesNotDependOnImageSize) {
  // The adaptive pools make the classifier independent of the input size, as in torchvision.
  EXPECT_EQ(build_model("vgg16", ModelConfig{2, 32, 1000, {}}).num_params(), 138357544);
  EXPECT_EQ(build_model("alexnet", ModelConfig{2, 63, 1000, {}}).num_params(), 61100840);
}

TEST(Models, Resnet18StateDictNamesAndShapes) {
  CpuBackend b({});
  Graph g = build_model("resnet18", ModelConfig{2, 32, 1000, {}});
  Rng rng(0);
  g.setup(b, rng);
  int64_t total = 0;
  for (auto& np : g.named_params()) total += np.param.value.numel();
  EXPECT_EQ(total, 11689512);
  const StateDict s = g.state_dict();
  // torchvision: 62 parameters and 20 batch norms x 3 buffers.
  EXPECT_EQ(s.size(), 62u + 60u);
  EXPECT_EQ(s.at("conv1.weight").shape, (Shape{64, 3, 7, 7}));
  EXPECT_EQ(s.at("layer2.0.downsample.0.weight").shape, (Shape{128, 64, 1, 1}));
  EXPECT_EQ(s.at("layer4.1.bn2.running_var").shape, (Shape{512}));
  EXPECT_EQ(s.at("layer1.0.bn1.num_batches_tracked").dtype, DType::kI64);
  EXPECT_EQ(s.at("fc.weight").shape, (Shape{1000, 512}));
  EXPECT_EQ(s.count("layer1.0.downsample.0.weight"), 0u);  // no downsample in layer1
}

TEST(Models, GradientsLiveInOneBufferInReverseLayerOrderEachAligned) {
  CpuBackend b({});
  Graph g = build_model("resnet18", ModelConfig{2, 32, 10, {}});
  Rng rng(0);
  g.setup(b, rng);
  const Tensor& flat = g.bound().tensor(g.flat_gradient_id());
  const char* const base = flat.data<char>();
  const char* expected = base;
  auto aligned = [&](const char* p) {
    const size_t off = static_cast<size_t>(p - base);
    return base +
           (off + kGradientAlignmentBytes - 1) / kGradientAlignmentBytes * kGradientAlignmentBytes;
  };
  const auto& nodes = g.nodes();
  size_t i = 0;
  for (int node = static_cast<int>(nodes.size()) - 1; node >= 1; --node) {  // last layer first
    const LayerTensors& t = g.layer_tensors(node);
    for (const std::string& p : t.param_names()) {  // weight, then bias, each 256-byte aligned
      expected = aligned(expected);
      EXPECT_EQ(t.grad(p).data<char>(), expected) << nodes[node].name << "." << p;
      EXPECT_EQ(g.flat_params().at(i).name, nodes[node].name + "." + p);
      EXPECT_EQ(g.grad_offsets().at(i++) * 4, expected - base);
      expected += t.grad(p).bytes();
    }
  }
  EXPECT_EQ(expected, base + flat.bytes());
  // resnet18 with 10 classes: fc.bias (10 floats) would leave every later gradient 8-byte aligned.
  EXPECT_GT(flat.numel(), g.num_params());
  EXPECT_LT(flat.numel(), g.num_params() + 64 * static_cast<int64_t>(i));
  for (int64_t k = 0; k < flat.numel(); ++k) {  // the gaps are zero (and so are the gradients)
    ASSERT_EQ(flat.data<float>()[k], 0.f) << k;
  }
  EXPECT_EQ(nodes.back().name, "fc");  // so fc.weight's gradient opens the buffer
}

TEST(Models, Resnet50UsesV15StrideOnTheThreeByThree) {
  const Graph g = build_model("resnet50", ModelConfig{1, 224, 1000, {}});
  for (const auto& n : g.nodes()) {
    if (n.name == "layer2.0.conv1") {
      EXPECT_EQ(n.shape, (Shape{1, 128, 56, 56}));  // 1x1, stride 1
    }
    if (n.name == "layer2.0.conv2") {
      EXPECT_EQ(n.shape, (Shape{1, 128, 28, 28}));  // 3x3 carries the stride
    }
  }
}

TEST(Models, AlexnetAndVggClassifierNumbering) {
  CpuBackend b({});
  Graph g = build_model("alexnet", ModelConfig{1, 63, 10, {}});
  Rng rng(0);
  g.setup(b, rng);
  std::set<std::string> names;
  for (auto& np : g.named_params()) names.insert(np.name);
  for (const char* n :
       {"features.0.weight", "features.3.weight", "features.6.weight", "features.8.weight",
        "features.10.weight", "classifier.1.weight", "classifier.4.weight", "classifier.6.bias"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
  EXPECT_EQ(names.size(), 16u);
}

TEST(Models, ImageTooSmallNamesTheSmallestSize) {
  try {
    build_model("alexnet", ModelConfig{1, 62, 1000, {}});
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("smallest it accepts is 63x63"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(min_image_size(find_model("vgg16")), 32);
  EXPECT_NO_THROW(build_model("vgg16", ModelConfig{1, 32, 1000, {}}));
  EXPECT_THROW(build_model("vgg16", ModelConfig{1, 31, 1000, {}}), InvalidArgument);
}

TEST(Models, BadConfigsAreInvalidArguments) {
  EXPECT_THROW(build_model("resnet34", ModelConfig{}), InvalidArgument);
  EXPECT_THROW(build_model("resnet18", ModelConfig{0, 32, 10, {}}), InvalidArgument);
  EXPECT_THROW(build_model("resnet18", ModelConfig{2, 32, -3, {}}), InvalidArgument);
  EXPECT_THROW(build_model("alexnet", ModelConfig{1, 224, 1000, 1.5f}), InvalidArgument);
}

// Two dropout layers of one step draw from streams of their own: alexnet's and vgg16's
// classifier dropouts must not drop the same elements. Two dropouts over one input of ones: each
// output is its mask.
TEST(Models, DropoutLayersOfOneStepDrawTheirOwnMasks) {
  CpuBackend cpu({});
  Graph g(Shape{2, 3, 4, 4});
  const int flat = g.add("flatten", std::make_unique<Flatten>(), {0});
  const int a = g.add("a", std::make_unique<Dropout>(0.5f), {flat});
  const int b = g.add("b", std::make_unique<Dropout>(0.5f), {flat});
  g.add("sum", std::make_unique<Add>(), {a, b});
  Rng rng(1);
  g.setup(cpu, rng);
  const std::vector<float> ones(2 * 3 * 4 * 4, 1.f);
  cpu.copy_from_host(ones.data(), g.bound().tensor(g.output_id(g.input())));
  const LayerContext ctx{cpu, true, DropoutSeed{77}};
  Executor(g.forward_schedule(), PassRunners{&g}, cpu.clock()).run(0, &ctx);
  const auto values = [&](int node) {
    const Tensor& t = g.bound().tensor(g.output_id(node));
    return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
  };
  const std::vector<float> ya = values(a), yb = values(b);
  int64_t kept_a = 0, kept_b = 0, differ = 0;
  for (size_t i = 0; i < ya.size(); ++i) {
    kept_a += ya[i] != 0.f;
    kept_b += yb[i] != 0.f;
    differ += (ya[i] != 0.f) != (yb[i] != 0.f);
  }
  EXPECT_GT(kept_a, 0);
  EXPECT_GT(kept_b, 0);
  // Independent masks at p = 0.5 disagree on half the elements (48 of 96); one mask, on none.
  EXPECT_GT(differ, 24);
}

}  // namespace
}  // namespace dlb
