// fp16 and bf16 training on the CPU backend: 16-bit storage with f32 master weights, exact
// memory by category, GradScaler's loss-scaling sequence with a planted overflow, and the digits
// reaching 95% in both precisions.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/core/error.h"
#include "runtime/train/trainer.h"
#include "suites/harness/run/epochs.h"
#include "workloads/data/dataset.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

size_t peak(Backend& b, MemCategory c) {
  return b.allocator().stats().peak[static_cast<size_t>(c)];
}

struct Footprint {
  size_t weights, gradients, activations, data, optimizer_state;
};

Footprint digits_footprint(Precision p) {
  auto b = make_backend(BackendKind::kCpu, {});
  Graph g = build_model("digits-cnn", ModelConfig{8, 8, 10, {}});
  Rng rng(0);
  g.declare_for(*b, PrecisionPolicy::for_precision(p));
  Trainer t(*b, g, TrainConfig{}, rng);
  const Dataset d = make_synthetic(8, 1, 8, 10, 3);
  t.load_batch(d.images.data(), d.labels.data());
  t.step();
  return {peak(*b, MemCategory::kWeights), peak(*b, MemCategory::kGradients),
          peak(*b, MemCategory::kActivations), peak(*b, MemCategory::kData),
          peak(*b, MemCategory::kOptimizerState)};
}

// The digits CNN at batch 8 (8x8 images, 10 classes), counted by hand:
//   parameters: conv1 32x1x3x3 + 32, conv2 64x32x3x3 + 64, fc1 1024x128... as 128x1024 + 128,
//     fc2 10x128 + 10 = 320 + 18,496 + 131,200 + 1,290 = 151,306 values;
//   activations: outputs conv1 8x32x8x8 and conv2 8x64x8x8 (each with its ReLU, which the CPU
//     backend fuses: the ReLU's output is the convolution's), pool 8x64x4x4, fc1 8x128, relu,
//     dropout, fc2 8x10 (flatten is a view) = 60,496 values, their gradients as many, and
//     dropout's mask 8x128: 122,016 values in the activations' type (each fused convolution
//     masks its output's gradient in that gradient's own bytes: Graph::overlay_scratch);
//     then in f32 whatever the precision: the softmax probabilities (80), the loss (1) and the
//     losses not yet read back (64): 580 bytes;
//   data: the input 8x1x8x8 in the activations' type, and 8 int64 labels.
TEST(MixedPrecision, MemoryByCategoryIsExact) {
  const Footprint f32 = digits_footprint(Precision::kFp32);
  const Footprint bf16 = digits_footprint(Precision::kBf16);
  const Footprint fp16 = digits_footprint(Precision::kFp16);
  EXPECT_EQ(f32.activations, 122016u * 4 + 580);
  EXPECT_EQ(bf16.activations, 122016u * 2 + 580);  // the 16-bit tensors in half the bytes
  EXPECT_EQ(fp16.activations, bf16.activations);
  EXPECT_EQ(f32.data, 512u * 4 + 64);
  EXPECT_EQ(bf16.data, 512u * 2 + 64);
  // f32 master weights in every precision, plus the 16-bit copies that the passes read.
  EXPECT_EQ(f32.weights, 151306u * 4);
  EXPECT_EQ(bf16.weights, 151306u * 4 + 151306u * 2);
  // Momentum stays f32, with the trainer's step counter (one int64); fp16 adds the loss
  // scaler's 4 floats.
  EXPECT_EQ(f32.optimizer_state, 151306u * 4 + 8);
  EXPECT_EQ(bf16.optimizer_state, 151306u * 4 + 8);
  EXPECT_EQ(fp16.optimizer_state, 151306u * 4 + 8 + 16);
  // Gradients, each starting on a 256-byte boundary (64 f32 or 128 16-bit values), in reverse
  // layer order: fc2 1280 + 10, fc1 131072 + 128, conv2 18432 + 64, conv1 288 + 32.
  //   f32:  1280 -> 1290 | 1344 + 131072 = 132416 -> 132544 -> 150976 -> 151040 -> 151328 |
  //         151360 -> 151392 values;
  //   16-bit: 1280 -> 1290 | 1408 + 131072 = 132480 -> 132608 -> 151040 -> 151104 | 151168
  //         -> 151456 | 151552 -> 151584 values.
  EXPECT_EQ(f32.gradients, 151392u * 4);
  EXPECT_EQ(bf16.gradients, 151584u * 2);
}

// GradScaler's sequence (PyTorch's _amp_update_scale_: back off and reset the growth tracker on
// an inf or NaN, else count; grow when the count reaches the interval), from scale 1024 with
// growth interval 3, with an overflow planted in step 1: the scale after each step is 1024, 512
// (skipped), 512, 512, 1024 (grown after 3 clean steps), 1024.
TEST(MixedPrecision, Fp16SkipsAnOverflowingStepAndTheScaleFollowsGradScaler) {
  auto b = make_backend(BackendKind::kCpu, {});
  Graph g = build_model("digits-cnn", ModelConfig{8, 8, 10, 0.f});
  Rng rng(0);
  g.declare_for(*b, PrecisionPolicy::for_precision(Precision::kFp16));
  TrainConfig tc;
  tc.sgd = SgdConfig{0.05f, 0.9f, 0.f};
  tc.loss_scaling = LossScaleConfig{1024.f, 2.f, 0.5f, 3};
  Trainer t(*b, g, tc, rng);
  ASSERT_NE(t.loss_scaler(), nullptr);
  const Dataset d = make_synthetic(8, 1, 8, 10, 3);
  std::vector<float> overflowing = d.images;
  overflowing[5] = 1e6f;  // beyond fp16's 65504: an infinity in the input, NaN gradients
  const std::vector<float> expected{1024, 512, 512, 512, 1024, 1024};
  for (size_t step = 0; step < expected.size(); ++step) {
    const uint64_t before = t.weights_checksum();
    t.load_batch(step == 1 ? overflowing.data() : d.images.data(), d.labels.data());
    t.step();
    EXPECT_EQ(t.loss_scaler()->scale(), expected[step]) << "after step " << step;
    if (step == 1) {
      EXPECT_EQ(t.weights_checksum(), before) << "the overflowing step is skipped";
    } else {
      EXPECT_NE(t.weights_checksum(), before) << "step " << step << " updates";
    }
  }
  EXPECT_EQ(t.loss_scaler()->skipped_steps(), 1);
  EXPECT_TRUE(std::isfinite(t.take_losses().back()));
}

TEST(MixedPrecision, AFixedScaleNeverChangesAndANonPositiveOneIsRefused) {
  auto b = make_backend(BackendKind::kCpu, {});
  Graph g = build_model("digits-cnn", ModelConfig{8, 8, 10, 0.f});
  Rng rng(0);
  g.declare_for(*b, PrecisionPolicy::for_precision(Precision::kFp16));
  TrainConfig tc;
  tc.loss_scaling = LossScaleConfig{128.f, 1.f, 1.f, 1};
  Trainer t(*b, g, tc, rng);
  const Dataset d = make_synthetic(8, 1, 8, 10, 3);
  std::vector<float> overflowing = d.images;
  overflowing[5] = 1e6f;
  for (int i = 0; i < 4; ++i) {  // step 2 overflows: skipped, counted, and the scale stays
    t.load_batch(i == 2 ? overflowing.data() : d.images.data(), d.labels.data());
    t.step();
  }
  EXPECT_EQ(t.loss_scaler()->scale(), 128.f);
  EXPECT_EQ(t.loss_scaler()->skipped_steps(), 1);
  for (float bad : {0.f, -1.f, std::numeric_limits<float>::infinity()}) {
    tc.loss_scaling.initial_scale = bad;
    Graph fresh = build_model("digits-cnn", ModelConfig{8, 8, 10, 0.f});
    fresh.declare_for(*b, PrecisionPolicy::for_precision(Precision::kFp16));
    Rng init(0);
    try {
      Trainer bad_scale(*b, fresh, tc, init);
      ADD_FAILURE() << "a loss scale of " << bad << " was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("loss scale must be positive"), std::string::npos)
          << e.what();
    }
    EXPECT_FALSE(fresh.is_setup()) << "refused before anything was allocated";
  }
}

// The digits CNN reaches 95% test accuracy on held-out digits in 8 epochs, in every precision
// the CPU runs (fp16 with dynamic loss scaling from 2^16).
class Convergence : public ::testing::TestWithParam<Precision> {};

TEST_P(Convergence, DigitsCnnReaches95PercentOnHeldOutDigits) {
  const DigitsSplit split = load_digits(default_digits_path(), 8);
  ASSERT_EQ(split.train.size() + split.test.size(), 1797);
  auto b = make_backend(BackendKind::kCpu, {});
  Graph g = build_model("digits-cnn", ModelConfig{32, 8, 10, {}});
  Rng rng(0);
  g.declare_for(*b, PrecisionPolicy::for_precision(GetParam()));
  TrainConfig tc;
  tc.sgd = SgdConfig{0.05f, 0.9f, 0.f};
  Trainer t(*b, g, tc, rng);
  Rng shuffle(1);
  double acc = 0;
  for (int e = 0; e < 8; ++e) {
    train_epoch(t, split.train, shuffle);
    acc = evaluate_accuracy(t, split.test);
  }
  EXPECT_GE(acc, 0.95);
}

INSTANTIATE_TEST_SUITE_P(Precisions, Convergence,
                         ::testing::Values(Precision::kFp32, Precision::kBf16, Precision::kFp16),
                         [](const auto& info) { return std::string(precision_name(info.param)); });

}  // namespace
}  // namespace dlb
