// StepSpec::validate is the one place that says which of a step's choices go together: each rule
// refuses what it should, and the harness and the Trainer refuse with the spec's own message.
#include "runtime/train/step_spec.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/core/error.h"
#include "runtime/train/trainer.h"
#include "suites/harness/core/run_options.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

struct Case {
  const char* what;
  std::function<void(StepSpec&)> change;
  bool unsupported;  // Unsupported; else InvalidArgument
  const char* message;
};

StepSpec reuse() {
  StepSpec s;
  s.memory_plan = MemoryPlanKind::kReuse;
  return s;
}

const SyncMode kAsync{SyncMode::Kind::kAsync, 0};
const SyncMode kStale2{SyncMode::Kind::kStale, 2};
const SyncMode kIndependent{SyncMode::Kind::kIndependent, 0};

std::vector<Case> cases() {
  return {
      {"no ranks", [](StepSpec& s) { s.ranks = 0; }, false, "--ranks must be at least 1"},
      {"empty buckets", [](StepSpec& s) { s.bucket_mb = 0; }, false, "--bucket-mb must be above 0"},
      {"async alone", [](StepSpec& s) { s.sync = kAsync; }, false, "needs at least 2 ranks"},
      {"async overlapped",
       [](StepSpec& s) {
         s.sync = kAsync;
         s.ranks = 2;
         s.overlap = OverlapStrategy::kBackward;
       },
       false, "--sync=async pushes whole steps' gradients"},
      {"async bf16",
       [](StepSpec& s) {
         s.sync = kAsync;
         s.ranks = 2;
         s.precision = Precision::kBf16;
       },
       false, "it needs --precision=fp32"},
      {"stale overlapped",
       [](StepSpec& s) {
         s.sync = kStale2;
         s.overlap = OverlapStrategy::kForward;
       },
       false, "--sync=stale:2 schedules its own all-reduce"},
      {"stale fp16",
       [](StepSpec& s) {
         s.sync = kStale2;
         s.precision = Precision::kFp16;
       },
       false, "fp16's loss scaling"},
      {"stale captured",
       [](StepSpec& s) {
         s.sync = kStale2;
         s.capture = true;
       },
       false, "cannot rotate its slots"},
      {"independent overlapped",
       [](StepSpec& s) {
         s.sync = kIndependent;
         s.ranks = 2;
         s.overlap = OverlapStrategy::kForward;
       },
       false, "--sync=independent reduces no gradients"},
      {"guard in an arena", [](StepSpec& s) { s.memory_guard = true; }, true,
       "--memory-guard puts red zones"},
      {"recompute naive",
       [](StepSpec& s) {
         s.memory_plan = MemoryPlanKind::kNaive;
         s.recompute = RecomputePolicy{RecomputePolicy::Kind::kSqrt, 0};
       },
       false, "--recompute=sqrt frees activations"},
      {"swap naive",
       [](StepSpec& s) {
         s.memory_plan = MemoryPlanKind::kNaive;
         s.swap = SwapPolicy{SwapPolicy::Kind::kAll, {}};
       },
       false, "--swap=all frees activations' device bytes"},
      {"swap auto without a budget",
       [](StepSpec& s) {
         s.swap = {SwapPolicy::Kind::kAuto, {}};
       },
       false, "--swap=auto swaps the largest"},
      {"swap captured",
       [](StepSpec& s) {
         s.swap = {SwapPolicy::Kind::kAll, {}};
         s.capture = true;
       },
       true, "--swap with --cuda-graph"},
      {"guard captured",
       [](StepSpec& s) {
         s.memory_plan = MemoryPlanKind::kNaive;
         s.memory_guard = true;
         s.capture = true;
       },
       true, "--memory-guard checks memory between the passes"},
      {"captured ranks",
       [](StepSpec& s) {
         s.capture = true;
         s.ranks = 2;
       },
       true, "--cuda-graph captures one rank's step; with --ranks=2"},
  };
}

// The message validate() throws for `s` ("" if it throws none), checking its type.
std::string refusal(const StepSpec& s, bool unsupported) {
  try {
    s.validate();
  } catch (const Unsupported& e) {
    EXPECT_TRUE(unsupported) << e.what();
    return e.what();
  } catch (const InvalidArgument& e) {
    EXPECT_FALSE(unsupported) << e.what();
    return e.what();
  }
  return "";
}

TEST(StepSpec, EveryRuleRefusesItsCase) {
  EXPECT_NO_THROW(StepSpec{}.validate());
  EXPECT_NO_THROW(reuse().validate());
  for (const Case& c : cases()) {
    StepSpec s = reuse();
    c.change(s);
    EXPECT_NE(refusal(s, c.unsupported).find(c.message), std::string::npos) << c.what;
  }
}

TEST(SyncMode, EachModeReadsBackFromItsName) {
  for (const SyncMode& m : {SyncMode{}, kStale2, kAsync, kIndependent}) {
    const std::optional<SyncMode> read = parse_sync_mode(sync_mode_name(m));
    ASSERT_TRUE(read.has_value()) << sync_mode_name(m);
    EXPECT_TRUE(*read == m) << sync_mode_name(m);
  }
  EXPECT_EQ(sync_mode_name(kIndependent), "independent");
  EXPECT_FALSE(parse_sync_mode("independent:2").has_value());
  EXPECT_FALSE(parse_sync_mode("Independent").has_value());
}

TEST(StepSpec, WhatGoesTogetherPasses) {
  StepSpec s = reuse();
  s.sync = kStale2;
  s.precision = Precision::kBf16;
  s.recompute = {RecomputePolicy::Kind::kSqrt, 0};
  s.swap = {SwapPolicy::Kind::kAuto, {}};
  s.memory_budget = size_t{1} << 30;
  s.ranks = 4;
  EXPECT_NO_THROW(s.validate());
  s = reuse();  // independent ranks with loss scaling, and one independent rank
  s.sync = kIndependent;
  s.precision = Precision::kFp16;
  s.ranks = 2;
  EXPECT_NO_THROW(s.validate());
  s.ranks = 1;
  EXPECT_NO_THROW(s.validate());
  s = StepSpec{};  // the naive plan, one rank
  s.capture = true;
  EXPECT_NO_THROW(s.validate());
  s.capture = false;
  s.memory_guard = true;
  EXPECT_NO_THROW(s.validate());
}

// What the Trainer throws for its configuration on the digits CNN (one rank, CPU, fp32).
std::string trainer_refusal(const StepSpec& step) {
  auto backend = make_backend(BackendKind::kCpu, {});
  Graph g = build_model("digits-cnn", ModelConfig{4, 8, 10, 0.f});
  g.declare_for(*backend);
  TrainConfig c;
  c.step = step;
  Rng rng(0);
  try {
    Trainer t(*backend, g, c, rng);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// One rule, one message: a run's options, and a Trainer's configuration, are refused as the
// spec is.
TEST(StepSpec, HarnessAndTrainerRefuseWithTheSpecsWords) {
  RunOptions o;
  o.memory_plan = MemoryPlanKind::kNaive;
  o.recompute = {RecomputePolicy::Kind::kSqrt, 0};
  const std::string spec = refusal(step_spec_of(o), false);
  ASSERT_FALSE(spec.empty());
  try {
    validate_run_options(o);
    ADD_FAILURE() << "validate_run_options passed recompute with the naive plan";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(e.what(), spec);
  }
  EXPECT_EQ(trainer_refusal(step_spec_of(o)), spec);

  StepSpec stale = reuse();
  stale.sync = kStale2;
  stale.overlap = OverlapStrategy::kBackward;
  EXPECT_EQ(trainer_refusal(stale), refusal(stale, false));
  StepSpec auto_swap = reuse();
  auto_swap.swap = {SwapPolicy::Kind::kAuto, {}};
  auto_swap.memory_budget = size_t{1} << 30;  // the allocator's, which has none, is the Trainer's
  StepSpec unbudgeted = auto_swap;
  unbudgeted.memory_budget.reset();
  EXPECT_EQ(trainer_refusal(auto_swap), refusal(unbudgeted, false));
}

// The spec's rules are written for the policies the precisions name: a hand-made one (fp32
// matrix products over 16-bit activations) would pass them unchecked, so the Trainer refuses it.
TEST(StepSpec, TheTrainerTrainsOnlyAPrecisionsPolicy) {
  auto backend = make_backend(BackendKind::kCpu, {});
  Graph g = build_model("digits-cnn", ModelConfig{4, 8, 10, 0.f});
  PrecisionPolicy mixed = PrecisionPolicy::for_precision(Precision::kFp32);
  mixed.activations = DType::kBF16;
  g.declare_for(*backend, mixed);
  Rng rng(0);
  try {
    Trainer t(*backend, g, TrainConfig{}, rng);
    ADD_FAILURE() << "a Trainer took a policy no precision names";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("PrecisionPolicy::for_precision"), std::string::npos);
  }
}

}  // namespace
}  // namespace dlb
