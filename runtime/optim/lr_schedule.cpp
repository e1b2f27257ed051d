#include "runtime/optim/lr_schedule.h"

#include <fmt/format.h>

#include <cmath>
#include <string>

#include "runtime/core/error.h"
#include "runtime/core/parse_number.h"

namespace dlb {

namespace {

constexpr int64_t kInt32Max = 2147483647;  // warm-up steps and boundary epochs fit an int

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A finite number of at least 0 that is all of `text` (digits and one point).
std::optional<double> decimal(std::string_view text) {
  if (text.empty() || text.size() > 24) return std::nullopt;
  int points = 0;
  for (char c : text) {
    if (c == '.') {
      ++points;
    } else if (c < '0' || c > '9') {
      return std::nullopt;
    }
  }
  if (points > 1 || text == ".") return std::nullopt;
  return std::stod(std::string(text));
}

std::string shortest(double v) { return fmt::format("{}", v); }

}  // namespace

const char* lr_scaling_name(LrScaling s) { return s == LrScaling::kLinear ? "linear" : "none"; }

std::optional<LrScaling> parse_lr_scaling(std::string_view text) {
  for (LrScaling s : kLrScalings) {
    if (text == lr_scaling_name(s)) return s;
  }
  return std::nullopt;
}

std::optional<LrWarmup> parse_lr_warmup(std::string_view text) {
  LrWarmup w;
  if (ends_with(text, "steps")) {
    const auto n = parse_whole(text.substr(0, text.size() - 5), 1, kInt32Max);
    if (!n) return std::nullopt;
    w.length = static_cast<double>(*n);
    w.in_steps = true;
    return w;
  }
  if (ends_with(text, "epochs")) text.remove_suffix(6);
  const auto n = decimal(text);
  if (!n || *n > 1e6) return std::nullopt;
  w.length = *n;
  return w;
}

std::string lr_warmup_name(const LrWarmup& w) {
  if (w.length == 0) return "0";
  return shortest(w.length) + (w.in_steps ? "steps" : "epochs");
}

std::optional<LrSchedule> parse_lr_schedule(std::string_view text) {
  LrSchedule s;
  if (text == "constant") return s;
  if (text == "cosine") {
    s.kind = LrSchedule::Kind::kCosine;
    return s;
  }
  if (text.rfind("step:", 0) != 0) return std::nullopt;
  s.kind = LrSchedule::Kind::kStep;
  std::string_view rest = text.substr(5);
  while (true) {
    const size_t comma = rest.find(',');
    const auto e = parse_whole(rest.substr(0, comma), 1, kInt32Max);
    if (!e || (!s.boundaries.empty() && *e <= s.boundaries.back())) return std::nullopt;
    s.boundaries.push_back(*e);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return s;
}

const char* lr_schedule_kind_name(LrSchedule::Kind k) {
  switch (k) {
    case LrSchedule::Kind::kStep:
      return "step";
    case LrSchedule::Kind::kCosine:
      return "cosine";
    case LrSchedule::Kind::kConstant:
      break;
  }
  return "constant";
}

std::string lr_schedule_name(const LrSchedule& s) {
  if (s.kind != LrSchedule::Kind::kStep) return lr_schedule_kind_name(s.kind);
  std::string text = "step:";
  for (size_t i = 0; i < s.boundaries.size(); ++i) {
    text += (i ? "," : "") + std::to_string(s.boundaries[i]);
  }
  return text;
}

bool LrPolicy::varies() const {
  return warmup.length > 0 || schedule.kind != LrSchedule::Kind::kConstant;
}

double scaled_lr(const LrPolicy& policy, double lr, int64_t global_batch) {
  if (policy.scaling == LrScaling::kNone) return lr;
  const double scaled =
      lr * static_cast<double>(global_batch) / static_cast<double>(policy.reference_batch);
  // The optimizer keeps the rate as a 32-bit float: scaled past its range, or below its smallest
  // normal number, it would become inf (a diverged run) or 0 (a run that learns nothing).
  const float f = static_cast<float>(scaled);
  if (lr != 0 && (!std::isfinite(f) || !std::isnormal(f))) {
    throw InvalidArgument(fmt::format(
        "--lr={} scaled linearly by the global batch {} over --lr-reference-batch={} is {:.3g}, "
        "outside the 32-bit float the run keeps it in",
        static_cast<float>(lr), global_batch, policy.reference_batch, scaled));
  }
  return scaled;
}

LrRule::LrRule(const LrPolicy& policy, double lr, int64_t global_batch, int64_t steps_per_epoch,
               int64_t epochs)
    : policy_(policy),
      base_(scaled_lr(policy, lr, global_batch)),
      k_(static_cast<double>(global_batch) / static_cast<double>(policy.reference_batch)),
      steps_per_epoch_(steps_per_epoch),
      total_steps_(steps_per_epoch * epochs) {
  if (steps_per_epoch < 1 || epochs < 1) {
    throw InvalidArgument(
        fmt::format("a learning-rate rule over {} epochs of {} steps", epochs, steps_per_epoch));
  }
  const LrWarmup& w = policy.warmup;
  warmup_steps_ =
      w.in_steps
          ? static_cast<int64_t>(w.length)
          : static_cast<int64_t>(std::llround(w.length * static_cast<double>(steps_per_epoch)));
  if (w.length > 0 && warmup_steps_ == 0) {
    throw InvalidArgument(fmt::format("--lr-warmup={}: shorter than one step ({} steps an epoch)",
                                      lr_warmup_name(w), steps_per_epoch));
  }
  if (w.length > 0 && warmup_steps_ >= total_steps_) {
    throw InvalidArgument(fmt::format(
        "--lr-warmup={}: the warm-up ({} steps) is as long as the run or longer ({} epochs of {} "
        "steps: {} steps)",
        lr_warmup_name(w), warmup_steps_, epochs, steps_per_epoch, total_steps_));
  }
  for (int64_t b : policy.schedule.boundaries) {
    if (b >= epochs) {
      throw InvalidArgument(fmt::format(
          "--lr-schedule={}: a decay after {} epochs is not before the run's end ({} epochs)",
          lr_schedule_name(policy.schedule), b, epochs));
    }
  }
}

double LrRule::warmup_epochs() const {
  return static_cast<double>(warmup_steps_) / static_cast<double>(steps_per_epoch_);
}

double LrRule::at(int64_t step) const {
  if (step < warmup_steps_) {
    if (k_ <= 1) return base_;
    const double f = static_cast<double>(step) / static_cast<double>(warmup_steps_);
    return base_ * (1 / k_ + (1 - 1 / k_) * f);
  }
  switch (policy_.schedule.kind) {
    case LrSchedule::Kind::kConstant:
      return base_;
    case LrSchedule::Kind::kStep: {
      double rate = base_;
      for (int64_t b : policy_.schedule.boundaries) {
        if (step >= b * steps_per_epoch_) rate *= 0.1;
      }
      return rate;
    }
    case LrSchedule::Kind::kCosine: {
      const double span = static_cast<double>(total_steps_ - warmup_steps_);
      const double t = static_cast<double>(step - warmup_steps_) / span;
      return base_ * 0.5 * (1 + std::cos(M_PI * std::min(t, 1.0)));
    }
  }
  return base_;
}

}  // namespace dlb
