// Learning-rate rules for large global batches (Goyal et al. 2017, "Accurate, Large Minibatch
// SGD"), applied step by step to the optimizer's rate:
// - scaling: linear multiplies the rate by k = global batch / reference batch (256 by default,
//   theirs); none leaves it;
// - warm-up: over its first W steps (or epochs) the rate rises linearly from base / k to base
//   (their gradual warm-up, from eta to k eta), k the same ratio with or without scaling; where
//   the global batch is no larger than the reference (k <= 1), there is nothing to warm up from
//   and the rate is the base throughout;
// - schedule, after the warm-up: constant; step:E1,E2,... (the rate divided by 10 once each of
//   those numbers of epochs has run: step:30,60 as He et al., MLPerf's decay boundary epochs);
//   cosine (half a cosine from the base to 0 over the steps from the warm-up's end to the run's
//   last).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlb {

enum class LrScaling { kNone, kLinear };
inline constexpr LrScaling kLrScalings[] = {LrScaling::kNone, LrScaling::kLinear};
const char* lr_scaling_name(LrScaling s);
std::optional<LrScaling> parse_lr_scaling(std::string_view text);

struct LrWarmup {
  double length = 0;      // 0: none
  bool in_steps = false;  // else epochs
  bool operator==(const LrWarmup& o) const { return length == o.length && in_steps == o.in_steps; }
};
// "0" (none), "N" or "Nepochs" (N epochs, N > 0, fractional allowed), "Nsteps" (a whole N);
// nullopt for anything else.
std::optional<LrWarmup> parse_lr_warmup(std::string_view text);
std::string lr_warmup_name(const LrWarmup& w);  // the text parse_lr_warmup reads

struct LrSchedule {
  enum class Kind { kConstant, kStep, kCosine };
  Kind kind = Kind::kConstant;
  std::vector<int64_t> boundaries;  // kStep: epochs, increasing, each >= 1
  bool operator==(const LrSchedule& o) const {
    return kind == o.kind && boundaries == o.boundaries;
  }
};
// "constant", "cosine", "step:E1,E2,..." (increasing epochs >= 1); nullopt for anything else.
std::optional<LrSchedule> parse_lr_schedule(std::string_view text);
std::string lr_schedule_name(const LrSchedule& s);      // the text parse_lr_schedule reads
const char* lr_schedule_kind_name(LrSchedule::Kind k);  // "constant", "step", "cosine"

struct LrPolicy {
  LrScaling scaling = LrScaling::kNone;
  int64_t reference_batch = 256;
  LrWarmup warmup;
  LrSchedule schedule;
  // Whether the rate changes from step to step (a warm-up or a schedule other than constant).
  bool varies() const;
};

// The rate as a function of the step: `lr` the configured rate, `global_batch` the images of one
// step over every rank, and the run's length, `steps_per_epoch` times `epochs`.
class LrRule {
 public:
  // InvalidArgument where the warm-up is shorter than a step or at least the run, or a step
  // boundary is not before its last epoch's end.
  LrRule(const LrPolicy& policy, double lr, int64_t global_batch, int64_t steps_per_epoch,
         int64_t epochs);
  double base() const { return base_; }  // after scaling: the rate the warm-up reaches
  double k() const { return k_; }        // global batch / reference batch
  int64_t warmup_steps() const { return warmup_steps_; }
  double warmup_epochs() const;
  // The rate of step `step`, counted from 0 over the whole run.
  double at(int64_t step) const;

 private:
  LrPolicy policy_;
  double base_, k_;
  int64_t steps_per_epoch_, total_steps_, warmup_steps_;
};

// The base rate with only the scaling applied (runs without epochs: synthetic data).
double scaled_lr(const LrPolicy& policy, double lr, int64_t global_batch);

}  // namespace dlb
