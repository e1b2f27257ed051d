// Batch norm + ReLU (and convolution + ReLU) fused by the graph: on a backend that fuses the pair,
// a ReLU whose only input is a batch norm (a convolution) that nothing else reads runs no pass of
// its own; the layer before it applies it.
// A backend that claims the fusion but keeps the Backend's defaults (the CPU's two ops, one
// after the other) must then train bit for bit as the unfused graph does, with exactly the ReLU
// outputs and their gradients less memory.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/delegating_backend.h"
#include "runtime/nn/layers/batch_norm.h"
#include "runtime/nn/layers/conv2d.h"
#include "runtime/nn/layers/elementwise.h"
#include "runtime/nn/layers/linear.h"
#include "runtime/train/trainer.h"
#include "workloads/data/dataset.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

class FusingBackend final : public DelegatingBackend {
 public:
  bool fuses_batch_norm_relu(const OpTypes&) const override { return true; }
};

// Records what it is asked to plan for batch norm (Backend::plan_batch_norm). It fuses batch
// norm with its ReLU and stores 16-bit activations channels-last, as the CUDA backend does.
class PlanRecordingBackend final : public CpuBackend {
 public:
  PlanRecordingBackend() : CpuBackend(BackendOptions{}) {}
  bool fuses_batch_norm_relu(const OpTypes&) const override { return true; }
  Layout activation_layout(const OpTypes& t) const override {
    return t.data == DType::kF32 ? Layout::kNCHW : Layout::kNHWC;
  }
  bool blocks_conv_weights(const OpTypes&) const override { return false; }
  void plan_batch_norm(const BatchNormShape& bn) override { planned.push_back(bn); }
  std::vector<BatchNormShape> planned;
};

// Each batch norm's training pass is planned with the graph's other plans, before anything is
// bound (the CUDA backend builds its cuDNN graphs and reserves their workspace there), with the
// shape, dtype, layout, eps and fused ReLU of the input its pass will be given.
TEST(Fusion, EveryBatchNormIsPlannedBeforeBindingAsItsPassRuns) {
  for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
    SCOPED_TRACE(precision_name(precision));
    PlanRecordingBackend b;
    Graph g = build_model("resnet18", ModelConfig{2, 32, 10, {}});
    g.declare_for(b, PrecisionPolicy::for_precision(precision));
    g.plan_ops(b);
    EXPECT_FALSE(g.is_setup());
    std::vector<Backend::BatchNormShape> expected;
    for (size_t i = 1; i < g.nodes().size(); ++i) {
      const auto* bn = dynamic_cast<const BatchNorm*>(g.nodes()[i].layer.get());
      if (!bn) continue;
      // What the pass is given: the input's tensor as declared (and bound).
      const TensorInfo& x = g.tensor_infos()[g.output_id(g.nodes()[i].inputs[0])];
      expected.push_back({x.shape, x.dtype, x.layout, bn->eps(), bn->fused_relu()});
    }
    ASSERT_EQ(expected.size(), 20u);  // torchvision's resnet18
    ASSERT_EQ(b.planned.size(), expected.size());
    int fused = 0, channels_last = 0;
    for (size_t k = 0; k < expected.size(); ++k) {
      SCOPED_TRACE(k);
      EXPECT_EQ(b.planned[k].x, expected[k].x);
      EXPECT_EQ(b.planned[k].dtype, expected[k].dtype);
      EXPECT_EQ(b.planned[k].layout, expected[k].layout);
      EXPECT_EQ(b.planned[k].eps, expected[k].eps);
      EXPECT_EQ(b.planned[k].relu, expected[k].relu);
      fused += b.planned[k].relu;
      channels_last += b.planned[k].layout == Layout::kNHWC;
    }
    // bn1 of the stem and of every block fuse; bn2 feeds the residual add.
    EXPECT_EQ(fused, 9);
    EXPECT_EQ(channels_last, precision == Precision::kBf16 ? 20 : 0);
  }
}

struct Trained {
  std::vector<float> losses;
  std::vector<std::vector<float>> grads, weights;
  size_t activation_peak = 0;
  int fused = 0;
  std::set<int> passes;  // nodes with a scheduled pass
};

Trained train(Backend& backend, const std::string& model, int64_t image_size) {
  Graph g = build_model(model, ModelConfig{2, image_size, 10, {}});
  Rng rng(5);
  g.declare_for(backend);
  TrainConfig tc;
  tc.sgd = SgdConfig{0.05f, 0.9f, 1e-4f};
  Trainer t(backend, g, tc, rng);
  const Dataset d = make_synthetic(2, 3, image_size, 10, 6);
  t.load_batch(d.images.data(), d.labels.data());
  for (int s = 0; s < 3; ++s) t.step();
  Trained out;
  out.losses = t.take_losses();
  for (const auto& np : g.named_params()) {
    auto host = [&](const Tensor& x) {
      std::vector<float> v(static_cast<size_t>(x.numel()));
      backend.copy_to_host(x, v.data());
      return v;
    };
    out.grads.push_back(host(np.param.grad));
    out.weights.push_back(host(np.param.value));
  }
  out.activation_peak =
      backend.allocator().stats().peak[static_cast<size_t>(MemCategory::kActivations)];
  for (size_t i = 0; i < g.nodes().size(); ++i) out.fused += g.fused_into(static_cast<int>(i)) >= 0;
  for (const Schedule* s : {&g.forward_schedule(), &g.backward_schedule()}) {
    for (const Step& step : s->steps) out.passes.insert(step.node);
  }
  return out;
}

TEST(Fusion, EveryReluAfterALoneBatchNormIsFusedAndRunsNoPass) {
  FusingBackend backend;
  Graph g = build_model("resnet50", ModelConfig{2, 32, 10, {}});
  Rng rng(5);
  g.setup(backend, rng);
  int fused = 0;
  std::set<int> passes;
  for (const Step& step : g.forward_schedule().steps) passes.insert(step.node);
  for (const Step& step : g.backward_schedule().steps) passes.insert(step.node);
  for (size_t i = 1; i < g.nodes().size(); ++i) {
    const auto& node = g.nodes()[i];
    const int into = g.fused_into(static_cast<int>(i));
    if (into < 0) continue;
    ++fused;
    SCOPED_TRACE(node.name);
    EXPECT_TRUE(node.layer->is_relu());
    EXPECT_EQ(node.inputs, std::vector<int>{into});
    const auto* bn = dynamic_cast<const BatchNorm*>(g.nodes()[into].layer.get());
    ASSERT_NE(bn, nullptr);
    EXPECT_TRUE(bn->fused_relu());
    EXPECT_EQ(passes.count(static_cast<int>(i)), 0u) << "a fused ReLU runs no pass";
    // Its output and gradient are the batch norm's bytes.
    const BoundStep& bound = g.bound();
    EXPECT_EQ(bound.tensor(g.output_id(static_cast<int>(i))).raw(),
              bound.tensor(g.output_id(into)).raw());
    EXPECT_EQ(bound.tensor(g.grad_id(static_cast<int>(i))).raw(),
              bound.tensor(g.grad_id(into)).raw());
  }
  // torchvision's Bottleneck: bn1 -> relu and bn2 -> relu fuse, bn3 feeds the residual add;
  // 16 blocks and the stem.
  EXPECT_EQ(fused, 2 * 16 + 1);
}

// A backend that runs every op on a CPU backend and fuses nothing (fuses_batch_norm_relu is not
// forwarded): the two layers as they are.
class PlainBackend final : public DelegatingBackend {};

// torchvision's BasicBlock: bn1 -> relu fuses, bn2 feeds the residual add; 8 blocks and the stem.
TEST(Fusion, TheCpuBackendFusesBatchNormAndRelu) {
  CpuBackend cpu({});
  EXPECT_EQ(train(cpu, "resnet18", 32).fused, 8 + 1);
  PlainBackend plain;
  EXPECT_EQ(train(plain, "resnet18", 32).fused, 0);
}

// A step dump keeps every node's tensors its own (Graph::keep_gradients_distinct): nothing fuses.
TEST(Fusion, AGraphThatKeepsGradientsDistinctFusesNothing) {
  CpuBackend cpu({});
  Graph g = build_model("resnet18", ModelConfig{2, 32, 10, {}});
  g.keep_gradients_distinct();
  g.declare_for(cpu);
  for (size_t i = 0; i < g.nodes().size(); ++i) EXPECT_LT(g.fused_into(static_cast<int>(i)), 0);
}

class FusedTraining : public ::testing::TestWithParam<const char*> {};

TEST_P(FusedTraining, TrainsBitForBitAsTheTwoLayersWithLessActivationMemory) {
  PlainBackend unfused;
  FusingBackend fusing;  // the Backend's composition of the pair
  CpuBackend cpu({});    // the CPU's own fused loops
  const Trained plain = train(unfused, GetParam(), 32);
  const Trained fused = train(fusing, GetParam(), 32);
  const Trained own = train(cpu, GetParam(), 32);
  EXPECT_EQ(plain.fused, 0);
  EXPECT_GT(fused.fused, 0);
  EXPECT_EQ(own.fused, fused.fused);
  EXPECT_EQ(fused.losses, plain.losses);
  EXPECT_EQ(fused.grads, plain.grads);
  EXPECT_EQ(fused.weights, plain.weights);
  EXPECT_EQ(own.losses, plain.losses);
  EXPECT_EQ(own.grads, plain.grads);
  EXPECT_EQ(own.weights, plain.weights);
  // Each fused ReLU allocates neither its output nor its output's gradient. The resnets' fused
  // ReLUs at 32x32, batch 2: resnet18's stem ReLU is [2, 64, 16, 16], and its 8 blocks' first
  // ReLUs hold 2 x (2 x 64 x 8 x 8 + 2 x 128 x 4 x 4 + 2 x 256 x 2 x 2 + 2 x 512 x 1 x 1) floats.
  const size_t stem = 2 * 64 * 16 * 16;
  const size_t blocks18 = 2 * (2 * 64 * 8 * 8 + 2 * 128 * 4 * 4 + 2 * 256 * 2 * 2 + 2 * 512);
  if (std::string(GetParam()) == "resnet18") {
    EXPECT_EQ(plain.activation_peak - fused.activation_peak, 2 * 4 * (stem + blocks18));
  } else {
    EXPECT_LT(fused.activation_peak, plain.activation_peak);
  }
}

// A batch norm that something besides the ReLU reads keeps its own output: no fusion. A
// BatchNorm1d on [N, C] before a ReLU fuses like a 2-D one.
Graph small_graph(bool bn_read_twice) {
  Graph g(Shape{4, 3, 6, 6});
  const int conv = g.add("conv", std::make_unique<Conv2d>(Conv2dOptions{3, 4, 3, 1, 1}), {0});
  const int bn = g.add("bn", std::make_unique<BatchNorm>(4), {conv});
  int x = g.add("relu", std::make_unique<Relu>(), {bn});
  if (bn_read_twice) x = g.add("sum", std::make_unique<Add>(), {x, bn});
  x = g.add("flatten", std::make_unique<Flatten>(), {x});
  x = g.add("fc", std::make_unique<Linear>(4 * 6 * 6, 8), {x});
  x = g.add("bn1d", std::make_unique<BatchNorm>(8), {x});
  x = g.add("relu1d", std::make_unique<Relu>(), {x});
  g.add("out", std::make_unique<Linear>(8, 10), {x});
  return g;
}

TEST(Fusion, OnlyAReluThatIsTheBatchNormsOnlyReaderFuses) {
  for (bool twice : {false, true}) {
    FusingBackend backend;
    Graph g = small_graph(twice);
    Rng rng(2);
    g.setup(backend, rng);
    const auto names = g.node_names();
    std::set<std::string> fused;
    for (size_t i = 0; i < names.size(); ++i) {
      if (g.fused_into(static_cast<int>(i)) >= 0) fused.insert(names[i]);
    }
    const std::set<std::string> want =
        twice ? std::set<std::string>{"relu1d"} : std::set<std::string>{"relu", "relu1d"};
    EXPECT_EQ(fused, want);
  }
}

// Training, and inference (batch norm on its running statistics, then the ReLU in place), agree
// bit for bit with the unfused graph, including the BatchNorm1d and the fork.
TEST(Fusion, SmallGraphsTrainAndInferAsUnfused) {
  for (bool twice : {false, true}) {
    std::vector<float> losses[3], logits[3];
    for (int fuse = 0; fuse < 3; ++fuse) {  // unfused, the composition, the CPU's own loops
      PlainBackend plain;
      FusingBackend fusing;
      CpuBackend cpu({});
      Backend* backends[] = {&plain, &fusing, &cpu};
      Backend& b = *backends[fuse];
      Graph g = small_graph(twice);
      Rng rng(2);
      g.declare_for(b);
      Trainer t(b, g, TrainConfig{}, rng);
      const Dataset d = make_synthetic(4, 3, 6, 10, 8);
      t.load_batch(d.images.data(), d.labels.data());
      for (int s = 0; s < 3; ++s) t.step();
      losses[fuse] = t.take_losses();
      t.count_correct(4);  // an inference forward
      logits[fuse].resize(40);
      b.copy_to_host(t.bound().tensor(g.output_id(g.output())), logits[fuse].data());
    }
    for (int fuse = 1; fuse < 3; ++fuse) {
      EXPECT_EQ(losses[fuse], losses[0]) << "read twice " << twice << ", fused " << fuse;
      EXPECT_EQ(logits[fuse], logits[0]) << "read twice " << twice << ", fused " << fuse;
    }
  }
}

// Convolution + ReLU, as alexnet's and vgg16's features have them: a convolution on the input
// (whose backward computes no data gradient), one without a bias, and ReLUs read by residual
// adds and by two layers (their gradients accumulated before the fused backward masks them).
class ConvFusingBackend final : public DelegatingBackend {
 public:
  bool fuses_conv_relu(const OpTypes&) const override { return true; }
};

Graph conv_relu_graph() {
  Graph g(Shape{4, 3, 6, 6});
  const int c1 = g.add("c1", std::make_unique<Conv2d>(Conv2dOptions{3, 4, 3, 1, 1}), {0});
  const int r1 = g.add("r1", std::make_unique<Relu>(), {c1});
  Conv2dOptions plain{4, 4, 3, 1, 1};
  plain.bias = false;
  const int c2 = g.add("c2", std::make_unique<Conv2d>(plain), {r1});
  const int r2 = g.add("r2", std::make_unique<Relu>(), {c2});
  const int sum = g.add("sum", std::make_unique<Add>(), {r2, r1});
  const int c3 = g.add("c3", std::make_unique<Conv2d>(Conv2dOptions{4, 4, 1}), {sum});
  const int r3 = g.add("r3", std::make_unique<Relu>(), {c3});
  int x = g.add("sum2", std::make_unique<Add>(), {r3, sum});
  x = g.add("flatten", std::make_unique<Flatten>(), {x});
  g.add("fc", std::make_unique<Linear>(4 * 6 * 6, 10), {x});
  return g;
}

TEST(Fusion, ConvolutionsAndTheirRelusTrainAndInferAsUnfused) {
  std::vector<float> losses[3], logits[3], grads[3];
  int fused[3] = {};
  for (int fuse = 0; fuse < 3; ++fuse) {  // unfused, the composition, oneDNN's post-op
    PlainBackend plain;
    ConvFusingBackend fusing;
    CpuBackend cpu({});
    Backend* backends[] = {&plain, &fusing, &cpu};
    Backend& b = *backends[fuse];
    Graph g = conv_relu_graph();
    Rng rng(3);
    g.declare_for(b);
    for (size_t i = 0; i < g.nodes().size(); ++i)
      fused[fuse] += g.fused_into(static_cast<int>(i)) >= 0;
    Trainer t(b, g, TrainConfig{}, rng);
    const Dataset d = make_synthetic(4, 3, 6, 10, 9);
    t.load_batch(d.images.data(), d.labels.data());
    for (int s = 0; s < 3; ++s) t.step();
    losses[fuse] = t.take_losses();
    for (const auto& np : g.named_params()) {
      std::vector<float> v(static_cast<size_t>(np.param.grad.numel()));
      b.copy_to_host(np.param.grad, v.data());
      grads[fuse].insert(grads[fuse].end(), v.begin(), v.end());
    }
    t.count_correct(4);  // an inference forward
    logits[fuse].resize(40);
    b.copy_to_host(t.bound().tensor(g.output_id(g.output())), logits[fuse].data());
    if (fuse == 0) continue;
    // Each masked gradient is its convolution's output gradient's own bytes (an add writes the
    // gradient of a fused ReLU's output, never passes its own through to it).
    int masked = 0;
    for (const TensorInfo& t : g.tensor_infos()) {
      if (t.name.find(".masked gradient") == std::string::npos) continue;
      ++masked;
      ASSERT_GE(t.alias_of, 0) << t.name;
      EXPECT_EQ(g.tensor_infos()[static_cast<size_t>(t.alias_of)].name,
                "grad of " + t.name.substr(0, t.name.find('.')));
    }
    EXPECT_EQ(masked, 3);
    // The convolution on the input has one backward pass, and it writes no data gradient.
    for (const Step& step : g.backward_schedule().steps) {
      if (step.node != 1) continue;
      EXPECT_EQ(step.pass, Pass::kBackward);
      EXPECT_EQ(step.dx, std::vector<int>{-1});
    }
  }
  EXPECT_EQ(fused[0], 0);
  for (int fuse = 1; fuse < 3; ++fuse) {
    EXPECT_EQ(fused[fuse], 3);
    EXPECT_EQ(losses[fuse], losses[0]) << "fused " << fuse;
    EXPECT_EQ(grads[fuse], grads[0]) << "fused " << fuse;
    EXPECT_EQ(logits[fuse], logits[0]) << "fused " << fuse;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, FusedTraining, ::testing::Values("resnet18", "resnet50"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace dlb
