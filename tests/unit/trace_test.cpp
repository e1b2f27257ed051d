// Tracing: a bounded window of steps, a span for every layer pass, valid Chrome trace JSON, and a
// per-layer profile; nothing recorded outside the window.
#include <gtest/gtest.h>

#include <set>

#include "runtime/train/profile.h"
#include "runtime/train/trainer.h"
#include "workloads/data/dataset.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

TEST(Trace, SpansCoverEveryLayerPassInTheWindowOnly) {
  auto b = make_backend(BackendKind::kCpu, {});
  Graph g = build_model("resnet18", ModelConfig{2, 32, 10, {}});
  Rng rng(0);
  g.setup(*b, rng);
  Trainer t(*b, g, TrainConfig{});
  Tracer tracer(2, 3);  // steps 2, 3, 4 of 0..5
  t.set_tracer(&tracer);
  const Dataset d = make_synthetic(2, 3, 32, 10, 1);
  t.load_batch(d.images.data(), d.labels.data());
  t.run(2, 4);
  EXPECT_EQ(tracer.traced_steps(), 3);
  std::set<std::pair<std::string, std::string>> seen;
  std::set<int64_t> steps;
  for (const Span& s : tracer.spans()) {
    seen.insert({s.name, s.category});
    steps.insert(s.step);
    EXPECT_GE(s.duration_us, 0);
  }
  EXPECT_EQ(steps, (std::set<int64_t>{2, 3, 4}));
  for (const auto& node : g.nodes()) {
    if (!node.layer || node.layer->is_view()) continue;  // a view (flatten) runs no pass
    EXPECT_TRUE(seen.count({node.name, "forward"})) << node.name;
    // Batch norm computes its data and weight gradients in one fused pass.
    const bool fused = node.layer->fused_backward();
    if (node.name != "conv1") {  // conv1's input is the image: no data gradient
      EXPECT_TRUE(seen.count({node.name, fused ? "backward" : "backward_data"})) << node.name;
    }
    EXPECT_EQ(seen.count({node.name, "backward_weights"}),
              node.layer->num_params() > 0 && !fused ? 1u : 0u)
        << node.name;
  }
  for (const char* n : {"loss", "sgd bucket", "step"}) {
    EXPECT_TRUE(std::any_of(seen.begin(), seen.end(), [&](auto& p) { return p.first == n; })) << n;
  }
  // Losses stay on the device through the window: no read-back inside it.
  EXPECT_FALSE(
      std::any_of(seen.begin(), seen.end(), [&](auto& p) { return p.first == "loss to host"; }));

  const auto trace = nlohmann::json::parse(tracer.chrome_trace(0).dump());
  int complete = 0;
  for (const auto& e : trace["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("tid") && e.contains("name"));
    if (e["ph"] == "X") {
      ++complete;
      ASSERT_TRUE(e["ts"].is_number() && e["dur"].is_number());
    }
  }
  EXPECT_EQ(complete, static_cast<int>(tracer.spans().size()));

  const auto profile = layer_profile(g, tracer);
  EXPECT_EQ(profile["traced_steps"], 3);
  for (const auto& layer : profile["layers"]) {
    EXPECT_TRUE(layer["forward_ms"].is_number()) << layer["name"];
    if (layer["name"] == "fc") {
      EXPECT_EQ(layer["grad_bytes"], (512 * 10 + 10) * 4);
    }
  }
}

TEST(Trace, NoWindowRecordsNothing) {
  Tracer tracer(0, 0);
  tracer.begin_step(0);
  static const std::string kX = "x", kY = "y";  // a scope refuses a temporary name
  { TraceScope s(&tracer, kX, "forward"); }
  TraceScope null_scope(nullptr, kY, "forward");
  EXPECT_TRUE(tracer.spans().empty());
}

}  // namespace
}  // namespace dlb
