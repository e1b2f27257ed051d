// Training behaviour end to end on the CPU: loss falls, real data reaches an accuracy, and
// memory budgets and precisions fail the way they should.
#include "runtime/train/trainer.h"

#include <gtest/gtest.h>

#include "runtime/core/error.h"
#include "workloads/data/dataset.h"
#include "workloads/data/epochs.h"
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
  g.setup(*b, rng);
  Trainer t(*b, g, sgd_config(0.01f, 3));
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

TEST(Trainer, DigitsCnnReaches95PercentOnHeldOutDigits) {
  const DigitsSplit split = load_digits(default_digits_path(), 8);
  ASSERT_EQ(split.train.size() + split.test.size(), 1797);
  auto b = make_backend(BackendKind::kCpu, {});
  Graph g = build_model("digits-cnn", ModelConfig{32, 8, 10, {}});
  Rng rng(0);
  g.setup(*b, rng);
  Trainer t(*b, g, sgd_config(0.05f));
  Rng shuffle(1);
  double acc = 0;
  for (int e = 0; e < 8; ++e) {
    train_epoch(t, split.train, shuffle);
    acc = evaluate_accuracy(t, split.test);
  }
  EXPECT_GE(acc, 0.95);
}

TEST(Trainer, TooSmallABudgetIsOutOfMemory) {
  BackendOptions o;
  o.memory_budget = 8 << 20;  // resnet18's weights alone are 44.6 MiB
  auto b = make_backend(BackendKind::kCpu, o);
  Graph g = build_model("resnet18", ModelConfig{2, 32, 1000, {}});
  Rng rng(0);
  EXPECT_THROW(g.setup(*b, rng), OutOfMemory);
}

TEST(Trainer, UnsupportedPrecisionIsUnsupported) {
  auto b = make_backend(BackendKind::kCpu, {});
  Graph g = build_model("digits-cnn", ModelConfig{4, 8, 10, {}});
  Rng rng(0);
  EXPECT_THROW(g.setup(*b, rng, PrecisionPolicy::for_precision(Precision::kBf16)), Unsupported);
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

}  // namespace
}  // namespace dlb
