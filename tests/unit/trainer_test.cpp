// Training behaviour end to end on the CPU: loss falls, real data reaches an accuracy, and
// memory budgets and precisions fail the way they should.
#include "runtime/train/trainer.h"

#include <gtest/gtest.h>

#include "runtime/core/error.h"
#include "suites/harness/run/epochs.h"
#include "workloads/data/dataset.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

TrainConfig sgd_config(float lr, uint64_t seed = 0) {
  TrainConfig c;
  c.sgd = SgdConfig{lr, 0.9f, 0.f};
  c.seed = seed;
  return c;
}

TEST(Trainer, Resnet18LossFallsOnSyntheticData) {
  auto b = make_backend(BackendKind::kCpu, {});
  Graph g = build_model("resnet18", ModelConfig{16, 32, 1000, {}});
  Rng rng(3);
  g.declare_for(*b);
  Trainer t(*b, g, sgd_config(0.01f, 3), rng);
  const Dataset d = make_synthetic(16, 3, 32, 1000, 11);
  t.load_batch(d.images.data(), d.labels.data());
  const RunStats s = t.run(0, 30);
  ASSERT_EQ(s.losses.size(), 30u);
  // ln(1000) = 6.91 at the start; 16 fixed images are memorised within 30 steps.
  EXPECT_NEAR(s.losses.front(), 6.91, 0.6);
  EXPECT_LT(s.losses.back(), 0.5);
  EXPECT_GT(s.throughput(), 0.0);
  EXPECT_EQ(s.step_seconds.size(), 30u);
}

TEST(Trainer, TooSmallABudgetIsOutOfMemory) {
  BackendOptions o;
  o.memory_budget = 8 << 20;  // resnet18's weights alone are 44.6 MiB
  auto b = make_backend(BackendKind::kCpu, o);
  Graph g = build_model("resnet18", ModelConfig{2, 32, 1000, {}});
  Rng rng(0);
  EXPECT_THROW(g.setup(*b, rng), OutOfMemory);
  EXPECT_FALSE(g.is_setup());  // a failed bind leaves nothing bound
  EXPECT_EQ(b->allocator().stats().total_current, 0u);
}

// A failed binding leaves nothing held, the workspace its layers' plans reserved included: with
// im2col those plans' workspace fits the budget, and then the weights do not.
TEST(Trainer, AFailedBindingReleasesTheWorkspaceItsPlansReserved) {
  BackendOptions o;
  o.memory_budget = 8 << 20;
  o.conv_algo = ConvAlgoChoice::kIm2col;
  auto b = make_backend(BackendKind::kCpu, o);
  Graph g = build_model("resnet18", ModelConfig{2, 32, 1000, {}});
  g.declare_for(*b);
  g.plan_ops(*b);
  const size_t workspace =
      b->allocator().stats().current[static_cast<size_t>(MemCategory::kWorkspace)];
  ASSERT_GT(workspace, 0u);  // the plans reserved it, within the budget
  Graph fresh = build_model("resnet18", ModelConfig{2, 32, 1000, {}});
  b->release_workspace();
  Rng rng(0);
  EXPECT_THROW(fresh.setup(*b, rng), OutOfMemory);
  EXPECT_FALSE(fresh.is_setup());
  EXPECT_EQ(b->allocator().stats().total_current, 0u);
}

TEST(Trainer, UnsupportedPrecisionIsUnsupported) {
  auto b = make_backend(BackendKind::kCpu, {});
  Graph g = build_model("digits-cnn", ModelConfig{4, 8, 10, {}});
  Rng rng(0);
  // The CPU's products are strict f32: it has no TF32.
  EXPECT_THROW(g.setup(*b, rng, PrecisionPolicy::for_precision(Precision::kTf32)), Unsupported);
}

// Support is checked before a byte is allocated: a precision the backend cannot run, for a
// model that would not fit the budget either, is refused as unsupported (what a user must
// change), not as out of memory, and nothing is allocated.
TEST(Trainer, UnsupportedIsReportedBeforeOutOfMemory) {
  BackendOptions o;
  o.memory_budget = 8 << 20;  // resnet18's weights alone are 44.6 MiB
  auto b = make_backend(BackendKind::kCpu, o);
  Graph g = build_model("resnet18", ModelConfig{2, 32, 1000, {}});
  g.declare_for(*b, PrecisionPolicy::for_precision(Precision::kTf32));
  Rng rng(0);
  EXPECT_THROW(Trainer(*b, g, TrainConfig{}, rng), Unsupported);
  Graph alone = build_model("resnet18", ModelConfig{2, 32, 1000, {}});  // the graph's own bind
  EXPECT_THROW(alone.setup(*b, rng, PrecisionPolicy::for_precision(Precision::kTf32)), Unsupported);
  EXPECT_EQ(b->allocator().allocations(), 0u);
  EXPECT_FALSE(g.is_setup());
}

TEST(Trainer, MissingDigitsFileNamesThePath) {
  try {
    load_digits("/nonexistent/digits.csv.gz", 8);
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/digits.csv.gz"), std::string::npos);
  }
  EXPECT_THROW(load_digits(default_digits_path(), 12), InvalidArgument);
}

// A device's clock: its marks carry the device's time (here, 5 ms more at every mark), which the
// host's reading of the time does not know.
class FakeDeviceClock final : public Clock {
 public:
  double now_us() const override { return 0; }
  double from_steady(std::chrono::steady_clock::time_point) const override { return 0; }
  Mark mark() const override {
    device_us_ += 5000;
    return Mark{0, std::make_shared<double>(device_us_)};
  }
  double elapsed_us(const Mark& a, const Mark& b) const override {
    return *static_cast<double*>(b.device.get()) - *static_cast<double*>(a.device.get());
  }

 private:
  mutable double device_us_ = 0;
};

TEST(Trainer, StepTimesComeFromTheClocksMarksNotTheHostsReading) {
  auto b = make_backend(BackendKind::kCpu, {});
  Graph g = build_model("digits-cnn", ModelConfig{4, 8, 10, {}});
  Rng rng(0);
  g.declare_for(*b);
  FakeDeviceClock clock;
  Trainer t(*b, g, sgd_config(0.01f), rng, &clock);
  const Dataset d = make_synthetic(4, 1, 8, 10, 2);
  t.load_batch(d.images.data(), d.labels.data());
  const RunStats s = t.run(1, 3);
  ASSERT_EQ(s.step_seconds.size(), 3u);
  for (double x : s.step_seconds) EXPECT_DOUBLE_EQ(x, 0.005);
  // Marks before the first and after the last step, and one after the final flush.
  EXPECT_DOUBLE_EQ(s.timed_seconds, 0.020);
}

TEST(Trainer, ALearningRateSetBetweenStepsIsTheNextUpdatesRate) {
  // The same two steps from the same start: at rate 0 the second changes no weight; at the
  // configured rate it does. The weights are compared by checksum.
  auto b = make_backend(BackendKind::kCpu, {});
  const Dataset d = make_synthetic(4, 1, 8, 10, 2);
  auto two_steps = [&](float second_rate) {
    Graph g = build_model("digits-cnn", ModelConfig{4, 8, 10, {}});
    Rng rng(0);
    g.declare_for(*b);
    TrainConfig c = sgd_config(0.05f);
    c.sgd.momentum = 0;  // no velocity carries the first step's update into the second
    Trainer t(*b, g, c, rng);
    t.load_batch(d.images.data(), d.labels.data());
    t.step();
    t.flush();
    const uint64_t after_first = t.weights_checksum();
    t.set_learning_rate(second_rate);
    EXPECT_EQ(t.learning_rate(), second_rate);
    t.step();
    t.flush();
    return t.weights_checksum() == after_first;
  };
  EXPECT_TRUE(two_steps(0.f));
  EXPECT_FALSE(two_steps(0.05f));
}

}  // namespace
}  // namespace dlb
