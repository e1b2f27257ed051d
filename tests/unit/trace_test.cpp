// Tracing: a bounded window of steps, a span for every layer pass, valid Chrome trace JSON, and a
// per-layer profile; nothing recorded outside the window.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/trace/comm_metrics.h"
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
  g.declare_for(*b);
  Trainer t(*b, g, TrainConfig{}, rng);
  Tracer other(2, 3);  // its own steady clock: the executor's marks would be another clock's
  EXPECT_THROW(t.set_tracer(&other), InvalidArgument);
  Tracer tracer(2, 3, &b->clock());  // steps 2, 3, 4 of 0..5
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
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const auto& node = g.nodes()[i];
    // a view (flatten), or a ReLU fused into the layer before it, runs no pass
    if (!node.layer || g.runs_no_pass(static_cast<int>(i))) continue;
    EXPECT_TRUE(seen.count({node.name, "forward"})) << node.name;
    // Batch norm computes its data and weight gradients in one fused pass.
    const bool fused = node.layer->fused_backward();
    // A residual add's inputs' gradients are its output's (Layer::passes_gradient_through): in
    // resnet18 every add is its inputs' last consumer, so none copies, and none has a pass.
    if (node.layer->passes_gradient_through()) {
      EXPECT_EQ(seen.count({node.name, "backward_data"}), 0u) << node.name;
    } else if (node.name != "conv1") {  // conv1's input is the image: no data gradient
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
  std::map<int64_t, std::set<int>> updated;  // per step, the buckets the optimizer ran on
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const auto& args = e["args"];
    if (e["cat"] == "forward" || e["cat"] == "backward_weights") {
      EXPECT_EQ(args["layer"], e["name"]);
      EXPECT_EQ(args["pass"], e["cat"]);
    }
    if (e["name"] == "sgd bucket") {
      updated[args["step"].get<int64_t>()].insert(args["bucket"].get<int>());
      EXPECT_EQ(args["pass"], "optimizer");
      EXPECT_FALSE(args.contains("layer"));
    }
  }
  std::set<int> every;
  for (size_t b = 0; b < t.bucket_plan().buckets.size(); ++b) every.insert(static_cast<int>(b));
  EXPECT_EQ(updated, (std::map<int64_t, std::set<int>>{{2, every}, {3, every}, {4, every}}));

  const auto profile = layer_profile(g, tracer);
  EXPECT_EQ(profile["traced_steps"], 3);
  for (const auto& layer : profile["layers"]) {
    EXPECT_TRUE(layer["forward_ms"].is_number()) << layer["name"];
    if (layer["name"] == "fc") {
      EXPECT_EQ(layer["grad_bytes"], (512 * 10 + 10) * 4);
    }
  }
}

TEST(Trace, SpanArgsSayLayerPassBucketAndBytesWhereTheyHaveThem) {
  Span conv{"layer1.0.conv1", "forward", Lane::kCompute, 7};
  conv.layer = true;
  EXPECT_EQ(span_args(conv),
            (nlohmann::json{{"step", 7}, {"pass", "forward"}, {"layer", "layer1.0.conv1"}}));
  Span reduce{"allreduce", "allreduce", Lane::kComm, 7, 0, 0, 4096};
  reduce.bucket = 3;
  reduce.clipped = true;
  EXPECT_EQ(span_args(reduce), (nlohmann::json{{"step", 7},
                                               {"pass", "allreduce"},
                                               {"bucket", 3},
                                               {"bytes", 4096.0},
                                               {"clipped", true}}));
  reduce.bucket = kEveryBucket;
  EXPECT_EQ(span_args(reduce)["bucket"], "all");
  Span copy{"batch to device", kCopyCategory, Lane::kCopy, 7, 0, 0, 1024};
  EXPECT_EQ(span_args(copy), (nlohmann::json{{"step", 7}, {"bytes", 1024.0}}));
  EXPECT_EQ(span_args(Span{"step", kStepCategory, Lane::kHost, 7}), (nlohmann::json{{"step", 7}}));
}

TEST(Trace, NoWindowRecordsNothing) {
  Tracer tracer(0, 0);
  tracer.begin_step(0);
  static const std::string kX = "x", kY = "y";  // a scope refuses a temporary name
  { TraceScope s(&tracer, kX, "forward"); }
  TraceScope null_scope(nullptr, kY, "forward");
  EXPECT_TRUE(tracer.spans().empty());
}

// A device's clock: each mark is an "event" whose time the test sets, unknown to the host.
class ScriptedDeviceClock final : public Clock {
 public:
  explicit ScriptedDeviceClock(std::vector<double> times) : times_(std::move(times)) {}
  double now_us() const override { return -1e9; }  // the host's reading must not be used
  double from_steady(std::chrono::steady_clock::time_point) const override { return -1e9; }
  Mark mark() const override { return Mark{-1e9, std::make_shared<double>(times_.at(next_++))}; }
  double elapsed_us(const Mark& a, const Mark& b) const override {
    return *static_cast<double*>(b.device.get()) - *static_cast<double*>(a.device.get());
  }
  Mark at(double us) const { return Mark{-1e9, std::make_shared<double>(us)}; }

 private:
  std::vector<double> times_;
  mutable size_t next_ = 0;
};

TEST(Tracer, SpansAreReadFromTheClocksMarksAndEdgeWorkIsClippedToTheWindow) {
  // Marks in order: the origin (100), the window's begin (200), a scope's start and end (250,
  // 400), the window's end (500).
  ScriptedDeviceClock clock({100, 200, 250, 400, 500});
  Tracer tracer(1, 1, &clock);
  tracer.begin_step(0);
  EXPECT_TRUE(tracer.wants_edge_work());  // the step before the window
  tracer.begin_step(1);
  const std::string name = "conv1";
  { TraceScope scope(&tracer, name, "forward"); }
  // An all-reduce from before the window into it, one inside, one wholly before: device marks.
  const Span comm{"allreduce", "allreduce", Lane::kComm, 0, 0, 0, 4096};
  tracer.record_clipped(comm, clock.at(150), clock.at(300), 0);
  tracer.record_clipped(comm, clock.at(420), clock.at(450), 1);
  tracer.record_clipped(comm, clock.at(120), clock.at(180), 0);
  tracer.end_window();
  const auto& spans = tracer.spans();
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].name, "conv1");
  EXPECT_DOUBLE_EQ(spans[0].start_us, 150);  // 250 - the origin's 100
  EXPECT_DOUBLE_EQ(spans[0].duration_us, 150);
  EXPECT_DOUBLE_EQ(spans[1].start_us, 100);  // clipped at the window's begin, 200
  EXPECT_DOUBLE_EQ(spans[1].duration_us, 100);
  EXPECT_TRUE(spans[1].clipped);
  EXPECT_DOUBLE_EQ(spans[2].start_us, 320);
  EXPECT_DOUBLE_EQ(spans[2].duration_us, 30);
  EXPECT_FALSE(spans[2].clipped);
  EXPECT_EQ(spans[1].step, 1);  // launched in step 0, before the window: its nearest traced step
}

// The input pipeline's threads: a lane each, at tid kLoader + thread, named for the threads seen;
// a loader span's args have no pass.
TEST(Tracer, EachLoaderThreadIsALaneOfItsOwn) {
  Tracer tracer(0, 1);
  tracer.begin_step(0);
  // Inside the window, whatever the clock's resolution: it ends a second from now.
  const auto now = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
  for (int64_t thread : {0, 2}) {
    Span span{"batch 0:1", kLoaderCategory, Lane::kLoader};
    span.thread = thread;
    tracer.record_clipped(span, tracer.host_mark(now),
                          tracer.host_mark(now + std::chrono::milliseconds(1)), 0);
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  tracer.end_window();
  const nlohmann::json trace = tracer.chrome_trace(0);
  std::map<int64_t, std::string> names;
  std::vector<int64_t> tids;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") names[e["tid"]] = e["args"]["name"];
    if (e["ph"] == "X") {
      tids.push_back(e["tid"]);
      EXPECT_FALSE(e["args"].contains("pass")) << e.dump();
    }
  }
  EXPECT_EQ(tids, (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(names[4], "loader 0");
  EXPECT_EQ(names[6], "loader 2");
  EXPECT_EQ(names.count(5), 0u);  // no thread 1 seen
  EXPECT_EQ(names[3], "host");
}

TEST(Tracer, HostAndDeviceMarksAreNotMixed) {
  ScriptedDeviceClock clock({0, 10, 20, 30});
  Tracer tracer(0, 1, &clock);
  tracer.begin_step(0);
  const Span comm{"allreduce", "allreduce", Lane::kComm, 0, 0, 0, 8};
  tracer.record_clipped(comm, Mark{5, nullptr}, Mark{6, nullptr}, 0);
  tracer.end_window();
  EXPECT_THROW(tracer.spans(), InvalidArgument);
}

// docs/metrics.md's communication metrics on a hand-made trace of two steps (microseconds):
//   step 1 [0, 100): compute [0, 30) [30, 70) [80, 90); buckets A [40, 75) and B [50, 85) in
//     flight together: comm [40, 85) = 45, under compute [40, 70) + [80, 85) = 35, exposed
//     [70, 80) = 10;
//   step 2 [100, 200): compute [100, 140) [140, 180) [190, 195); bucket C [150, 198) with D
//     [160, 170) nested in it, and E [195, 210) running past the last step: comm [150, 200) = 50
//     (E's 10 outside every step do not count), hidden [150, 180) + [190, 195) = 35, exposed
//     [180, 190) + [195, 200) = 15.
// Totals: comm 95, hidden 70, exposed 25; the spans' sum (143) is no time at all.
TEST(CommMetrics, UnionsOfSpansInsideTheSteps) {
  const auto span = [](const char* category, Lane lane, double start, double end) {
    Span s{"s", category, lane};
    s.start_us = start;
    s.duration_us = end - start;
    return s;
  };
  const std::vector<Span> spans{
      span(kStepCategory, Lane::kHost, 0, 100),
      span(kStepCategory, Lane::kHost, 100, 200),
      span("forward", Lane::kCompute, 0, 30),
      span("backward_data", Lane::kCompute, 30, 70),
      span("optimizer", Lane::kCompute, 80, 90),
      span("forward", Lane::kCompute, 100, 140),
      span("backward_data", Lane::kCompute, 140, 180),
      span("optimizer", Lane::kCompute, 190, 195),
      span("allreduce", Lane::kComm, 40, 75),
      span("allreduce", Lane::kComm, 50, 85),
      span("allreduce", Lane::kComm, 150, 198),
      span("allreduce", Lane::kComm, 160, 170),
      span("allreduce", Lane::kComm, 195, 210),
      span("copy", Lane::kCopy, 90, 100),  // neither compute nor communication
  };
  const CommTimes t = comm_times(spans);
  EXPECT_EQ(t.comm_s, 95 * 1e-6);
  EXPECT_EQ(t.hidden_s, 70 * 1e-6);
  EXPECT_EQ(t.exposed_s, 25 * 1e-6);
  // No communication: nothing exposed or hidden.
  const CommTimes none = comm_times({spans.begin(), spans.begin() + 8});
  EXPECT_EQ(none.comm_s, 0.0);
  EXPECT_EQ(none.exposed_s, 0.0);
  // Communication with no compute at all is all exposed.
  const CommTimes bare =
      comm_times({span(kStepCategory, Lane::kHost, 0, 10), span("allreduce", Lane::kComm, 2, 6),
                  span("allreduce", Lane::kComm, 4, 8)});
  EXPECT_EQ(bare.comm_s, 6 * 1e-6);
  EXPECT_EQ(bare.exposed_s, 6 * 1e-6);
  EXPECT_EQ(bare.hidden_s, 0.0);
}

}  // namespace
}  // namespace dlb
