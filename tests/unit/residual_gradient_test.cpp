// The residual add passes its gradient on (Layer::passes_gradient_through): an input's gradient is
// a view of the add's output gradient wherever the add writes it first, and the add's pass copies
// only into the rest. Training must be bit for bit the copying add's, with exactly the aliased
// gradients' bytes less memory.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/nn/layers/elementwise.h"
#include "runtime/nn/layers/linear.h"
#include "runtime/train/trainer.h"
#include "workloads/data/dataset.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

// The add as it was: its backward pass copies dy into both inputs' gradients.
class CopyingAdd final : public Layer {
 public:
  std::string_view kind() const override { return "add"; }
  Shape output_shape(const std::vector<Shape>& in) const override { return add_.output_shape(in); }
  void forward(const LayerContext& ctx, const LayerTensors& own,
               const std::vector<const Tensor*>& x, Tensor& y) override {
    add_.forward(ctx, own, x, y);
  }
  void backward_data(const LayerContext& ctx, const LayerTensors& own,
                     const std::vector<const Tensor*>& x, const Tensor& y, const Tensor& dy,
                     const std::vector<Tensor*>& dx) override {
    add_.backward_data(ctx, own, x, y, dy, dx);
  }
  double forward_flops(const std::vector<Shape>& in) const override {
    return add_.forward_flops(in);
  }

 private:
  Add add_;
};

// Four adds over linear layers, on a 2x3x4x4 input:
//   s = d(b(ra)) + ra: ra's last consumer is s, and b reads ra before it (a residual block's
//     identity): both gradients are s's, and b's share is added into it after d's passes;
//   u = c(rs) + rs, with t(rs) after u: rs's last consumer is t, so u copies into rs's gradient;
//   v = u + t: t's gradient is v's; u's already is c's (a view), so v copies into it;
//   w = e(rv) + rv: e reads rv, then w: e's weight pass would read rv's share, so w copies
//     into rv's gradient.
template <typename AddLayer>
Graph four_adds() {
  Graph g{Shape{2, 3, 4, 4}};
  auto linear = [&](const char* name, int from, int64_t out = 16) {
    return g.add(name, std::make_unique<Linear>(g.shape(from)[1], out), {from});
  };
  const int f = g.add("flatten", std::make_unique<Flatten>(), {g.input()});
  const int ra = g.add("ra", std::make_unique<Relu>(), {linear("a", f)});
  const int s = g.add("s", std::make_unique<AddLayer>(), {linear("d", linear("b", ra)), ra});
  const int rs = g.add("rs", std::make_unique<Relu>(), {s});
  const int u = g.add("u", std::make_unique<AddLayer>(), {linear("c", rs), rs});
  const int v = g.add("v", std::make_unique<AddLayer>(), {u, linear("t", rs)});
  const int rv = g.add("rv", std::make_unique<Relu>(), {v});
  const int w = g.add("w", std::make_unique<AddLayer>(), {linear("e", rv), rv});
  linear("fc", w, 10);
  return g;
}

struct Trained {
  std::vector<float> losses;
  std::vector<std::vector<float>> weights, grads;
  size_t naive_bytes = 0;
  std::vector<std::string> copying_adds;  // add nodes with a backward pass
};

Trained train(Graph g) {
  CpuBackend backend{BackendOptions{}};
  g.declare_for(backend);
  Trained out;
  out.naive_bytes = naive_plan(g.step_schedule(), g.tensor_infos()).device_bytes();
  for (const Step& step : g.backward_schedule().steps) {
    if (g.nodes()[step.node].layer->kind() == "add") {
      out.copying_adds.push_back(g.nodes()[step.node].name);
    }
  }
  Rng rng(7);
  TrainConfig tc;
  tc.sgd = SgdConfig{0.05f, 0.9f, 1e-4f};
  Trainer trainer(backend, g, tc, rng);
  const Dataset d = make_synthetic(2, 3, 4, 10, 3);
  trainer.load_batch(d.images.data(), d.labels.data());
  for (int i = 0; i < 3; ++i) trainer.step();
  out.losses = trainer.take_losses();
  for (const auto& np : g.named_params()) {
    auto host = [&](const Tensor& x) {
      std::vector<float> h(static_cast<size_t>(x.numel()));
      backend.copy_to_host(x, h.data());
      return h;
    };
    out.weights.push_back(host(np.param.value));
    out.grads.push_back(host(np.param.grad));
  }
  return out;
}

TEST(ResidualGradient, TrainsBitForBitAsTheCopyingAddWithTheAliasedBytesLess) {
  const Trained passing = train(four_adds<Add>());
  const Trained copying = train(four_adds<CopyingAdd>());
  EXPECT_EQ(passing.losses, copying.losses);
  EXPECT_EQ(passing.weights, copying.weights);
  EXPECT_EQ(passing.grads, copying.grads);
  EXPECT_EQ(copying.copying_adds, (std::vector<std::string>{"w", "v", "u", "s"}));
  EXPECT_EQ(passing.copying_adds, (std::vector<std::string>{"w", "v", "u"}));
  // Views now: d's and s's gradients (of ra's), u's (of c's), v's (of t's), w's (of e's).
  EXPECT_EQ(copying.naive_bytes - passing.naive_bytes, 5 * 2 * 16 * sizeof(float));
}

// A step dump keeps every gradient distinct: the adds copy, as the copying add does.
TEST(ResidualGradient, KeptDistinctEveryAddCopies) {
  Graph g = four_adds<Add>();
  g.keep_gradients_distinct();
  const Trained kept = train(std::move(g)), copying = train(four_adds<CopyingAdd>());
  EXPECT_EQ(kept.copying_adds, copying.copying_adds);
  EXPECT_EQ(kept.naive_bytes, copying.naive_bytes);
  EXPECT_EQ(kept.weights, copying.weights);
}

TEST(ResidualGradient, EveryResnetAddPassesItsGradientOnAndRunsNoPass) {
  for (const char* model : {"resnet18", "resnet50"}) {
    CpuBackend backend{BackendOptions{}};
    Graph g = build_model(model, ModelConfig{2, 32, 10, {}});
    g.declare_for(backend);
    const std::vector<TensorInfo>& infos = g.tensor_infos();
    int adds = 0;
    for (size_t i = 1; i < g.nodes().size(); ++i) {
      const Graph::Node& node = g.nodes()[i];
      if (!node.layer->passes_gradient_through()) continue;
      ++adds;
      const int dy = storage_of(g.grad_id(static_cast<int>(i)), infos);
      for (int j : node.inputs) {
        EXPECT_EQ(storage_of(g.grad_id(j), infos), dy) << model << " " << node.name;
      }
    }
    EXPECT_EQ(adds, std::string(model) == "resnet18" ? 8 : 16) << model;
    for (const Step& step : g.backward_schedule().steps) {
      EXPECT_FALSE(g.nodes()[step.node].layer->passes_gradient_through())
          << model << " " << g.nodes()[step.node].name;
    }
  }
}

}  // namespace
}  // namespace dlb
