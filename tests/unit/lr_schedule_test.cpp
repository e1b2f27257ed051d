// The learning-rate rules (runtime/optim/lr_schedule.h) against rates worked by hand, and the
// texts they are read from.
#include "runtime/optim/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

#include "runtime/core/error.h"

namespace dlb {
namespace {

LrPolicy policy(LrScaling scaling, const std::string& warmup, const std::string& schedule) {
  LrPolicy p;
  p.scaling = scaling;
  p.reference_batch = 32;
  p.warmup = *parse_lr_warmup(warmup);
  p.schedule = *parse_lr_schedule(schedule);
  return p;
}

TEST(LrRule, LinearScalingMultipliesByGlobalOverReferenceBatch) {
  const LrRule r(policy(LrScaling::kLinear, "0", "constant"), 0.1, 128, 10, 5);
  EXPECT_DOUBLE_EQ(r.k(), 4);
  EXPECT_DOUBLE_EQ(r.base(), 0.4);
  for (int64_t s : {0, 17, 49}) EXPECT_DOUBLE_EQ(r.at(s), 0.4);
  EXPECT_DOUBLE_EQ(LrRule(policy(LrScaling::kNone, "0", "constant"), 0.1, 128, 10, 5).base(), 0.1);
  EXPECT_DOUBLE_EQ(scaled_lr(policy(LrScaling::kLinear, "0", "constant"), 0.1, 16), 0.05);
}

TEST(LrRule, WarmupRisesLinearlyFromBaseOverKToBase) {
  // k = 4, base 0.4: 2 epochs of 10 steps from 0.1 up, 0.015 a step.
  const LrRule r(policy(LrScaling::kLinear, "2", "constant"), 0.1, 128, 10, 5);
  EXPECT_EQ(r.warmup_steps(), 20);
  EXPECT_DOUBLE_EQ(r.warmup_epochs(), 2);
  EXPECT_DOUBLE_EQ(r.at(0), 0.1);
  EXPECT_DOUBLE_EQ(r.at(10), 0.1 + 0.3 * 10 / 20);
  EXPECT_DOUBLE_EQ(r.at(19), 0.1 + 0.3 * 19 / 20);
  EXPECT_DOUBLE_EQ(r.at(20), 0.4);
  // In steps; without scaling it rises to the unscaled rate, from it over k.
  const LrRule steps(policy(LrScaling::kNone, "5steps", "constant"), 0.1, 128, 10, 5);
  EXPECT_EQ(steps.warmup_steps(), 5);
  EXPECT_DOUBLE_EQ(steps.at(0), 0.025);
  EXPECT_DOUBLE_EQ(steps.at(5), 0.1);
  // A global batch no larger than the reference has nothing to warm up from.
  const LrRule flat(policy(LrScaling::kLinear, "2", "constant"), 0.1, 32, 10, 5);
  EXPECT_DOUBLE_EQ(flat.at(0), 0.1);
}

TEST(LrRule, StepDividesByTenAfterEachBoundaryEpoch) {
  const LrRule r(policy(LrScaling::kNone, "0", "step:2,4"), 0.1, 32, 10, 5);
  EXPECT_DOUBLE_EQ(r.at(19), 0.1);   // the second epoch's last step
  EXPECT_DOUBLE_EQ(r.at(20), 0.01);  // after 2 epochs
  EXPECT_DOUBLE_EQ(r.at(39), 0.01);
  EXPECT_NEAR(r.at(40), 0.001, 1e-18);
}

TEST(LrRule, CosineFallsFromTheBaseToZeroAfterTheWarmup) {
  // 5 epochs of 10 steps, 10 of them warm-up: half a cosine over steps 10 to 50.
  const LrRule r(policy(LrScaling::kNone, "1", "cosine"), 0.1, 64, 10, 5);
  EXPECT_DOUBLE_EQ(r.at(0), 0.05);  // k = 2: the warm-up starts at half
  EXPECT_DOUBLE_EQ(r.at(10), 0.1);
  EXPECT_NEAR(r.at(30), 0.05, 1e-15);  // halfway
  EXPECT_NEAR(r.at(49), 0.1 * 0.5 * (1 + std::cos(M_PI * 39 / 40)), 1e-15);
}

TEST(LrRule, RefusesAWarmupAsLongAsTheRunAndABoundaryAtItsEnd) {
  EXPECT_THROW(LrRule(policy(LrScaling::kNone, "5", "constant"), 0.1, 64, 10, 5), InvalidArgument);
  EXPECT_THROW(LrRule(policy(LrScaling::kNone, "50steps", "constant"), 0.1, 64, 10, 5),
               InvalidArgument);
  EXPECT_NO_THROW(LrRule(policy(LrScaling::kNone, "49steps", "constant"), 0.1, 64, 10, 5));
  // 0.01 of a 10-step epoch rounds to no step at all.
  EXPECT_THROW(LrRule(policy(LrScaling::kNone, "0.01", "constant"), 0.1, 64, 10, 5),
               InvalidArgument);
  EXPECT_THROW(LrRule(policy(LrScaling::kNone, "0", "step:5"), 0.1, 64, 10, 5), InvalidArgument);
  EXPECT_NO_THROW(LrRule(policy(LrScaling::kNone, "0", "step:4"), 0.1, 64, 10, 5));
}

TEST(LrRule, TextsRoundTripAndNonsenseIsRefused) {
  for (const char* t : {"constant", "cosine", "step:30,60,80", "step:1"}) {
    EXPECT_EQ(lr_schedule_name(*parse_lr_schedule(t)), t);
  }
  for (const char* t : {"", "step:", "step:0", "step:3,2", "step:3,3", "step:1,", "cosine:2",
                        "linear", "step:-1"}) {
    EXPECT_FALSE(parse_lr_schedule(t)) << t;
  }
  EXPECT_EQ(lr_warmup_name(*parse_lr_warmup("5")), "5epochs");
  EXPECT_EQ(lr_warmup_name(*parse_lr_warmup("0.5epochs")), "0.5epochs");
  EXPECT_EQ(lr_warmup_name(*parse_lr_warmup("200steps")), "200steps");
  EXPECT_EQ(lr_warmup_name(*parse_lr_warmup("0")), "0");
  for (const char* t :
       {"", "-1", "1.5steps", "0steps", "steps", "epochs", "1e3", "2 epochs", "1..2", "nan"}) {
    EXPECT_FALSE(parse_lr_warmup(t)) << t;
  }
  EXPECT_EQ(parse_lr_scaling("linear"), LrScaling::kLinear);
  EXPECT_FALSE(parse_lr_scaling("sqrt"));
}

}  // namespace
}  // namespace dlb
