// Tracing: a bounded window of steps, a span for every layer pass, valid Chrome trace JSON, and a
// per-layer profile; nothing recorded outside the window.
#include <gtest/gtest.h>

#include <set>

#include "runtime/trace/profile.h"
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
    if (!node.layer) continue;
    EXPECT_TRUE(seen.count({node.name, "forward"})) << node.name;
    if (node.name != "conv1") {  // conv1's input is the image: no data gradient
      EXPECT_TRUE(seen.count({node.name, "backward_data"})) << node.name;
    }
    EXPECT_EQ(seen.count({node.name, "backward_weights"}), node.layer->num_params() > 0 ? 1u : 0u)
        << node.name;
  }
  for (const char* n : {"loss", "sgd bucket", "step", "loss to host"}) {
    EXPECT_TRUE(std::any_of(seen.begin(), seen.end(), [&](auto& p) { return p.first == n; })) << n;
  }

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
  { TraceScope s(&tracer, std::string("x"), "forward"); }
  TraceScope null_scope(nullptr, std::string("y"), "forward");
  EXPECT_TRUE(tracer.spans().empty());
}

}  // namespace
}  // namespace dlb
