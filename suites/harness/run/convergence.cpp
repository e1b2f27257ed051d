#include "suites/harness/run/convergence.h"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "runtime/core/stats.h"
#include "suites/harness/run/epochs.h"

namespace dlb {

void log_submission(MlLog& log, const MlLogFacts& f) {
  log.event("submission_org", "dlbench");
  log.event("submission_platform", f.platform);
  log.event("submission_division", "open");
  log.event("submission_status", "research");
  log.event("submission_benchmark", f.benchmark);
  log.event("cache_clear", false);  // dlbench does not drop OS caches
  log.event("seed", f.seed);
  log.event("global_batch_size", f.batch * f.ranks);
  log.event("micro_batch_size", f.batch);
  log.event("gradient_accumulation_steps", 1);
  log.event("train_samples", f.train_samples);
  log.event("eval_samples", f.eval_samples);
  log.event("opt_name", "sgd");
  log.event("opt_base_learning_rate", f.lr);
  log.event("opt_learning_rate_warmup_epochs", f.warmup_epochs);
  log.event("opt_learning_rate_decay_schedule", lr_schedule_kind_name(f.schedule.kind));
  if (f.schedule.kind == LrSchedule::Kind::kStep) {
    log.event("opt_learning_rate_decay_boundary_epochs", f.schedule.boundaries);
  }
  log.event("opt_momentum", f.momentum);
  log.event("opt_weight_decay", f.weight_decay);
  log.event("lowest_numerical_precision_in_linear", f.precision);
  log.event("lowest_numerical_precision_in_attn", f.precision);  // no attention; the same policy
  log.event("lowest_numerical_precision_in_comm", "fp32");
  for (const char* p :
       {"tensor_parallelism", "pipeline_parallelism", "context_parallelism", "expert_parallelism"})
    log.event(p, 1);
  log.event("config_filename", f.config_file);
}

namespace {

class DigitsEpochs final : public EpochData {
 public:
  DigitsEpochs(const DigitsSplit& digits, int64_t batch, Shard shard, uint64_t seed)
      : digits_(digits), shard_(shard), shuffle_(seed + 1), batches_(digits.train, batch, shard) {}
  int64_t steps() const override { return batches_.steps(); }
  void begin_epoch() override { batches_.shuffle(shuffle_); }
  void load(Trainer& trainer, int64_t step) override { batches_.load(trainer, step); }
  int64_t count_correct(Trainer& trainer) override {
    return dlb::count_correct(trainer, digits_.test, shard_);
  }
  int64_t train_samples() const override { return digits_.train.size(); }
  int64_t test_samples() const override { return digits_.test.size(); }
  std::string test_name() const override { return "held-out digits"; }

 private:
  const DigitsSplit& digits_;
  Shard shard_;
  Rng shuffle_;  // the same on every rank: each takes its slice of one order
  EpochBatches batches_;
};

// One run to a target accuracy, as Trainer::train's hooks: the shuffle and MLPerf's epoch events
// before each epoch, the evaluation after it, and what the record says of it all. Times come from
// the trainer's clock, from run_start.
class ToAccuracy {
 public:
  ToAccuracy(Trainer& trainer, Communicator& comm, EpochData& data, const ConvergenceOptions& o,
             MlLog* log)
      : trainer_(trainer),
        comm_(comm),
        data_(data),
        o_(o),
        log_(log),
        run_start_(trainer.clock().mark()) {}

  TrainingLoop loop() {
    TrainingLoop l;
    l.steps_per_epoch = data_.steps();
    l.max_epochs = o_.max_epochs;
    l.before_epoch = [this](int64_t e) {
      if (log_) log_->start("epoch_start", nullptr, {{"epoch_num", e}});
      data_.begin_epoch();
    };
    l.load = [this](int64_t epoch, int64_t step) {
      if (o_.lr) {
        const double rate = o_.lr->at((epoch - 1) * data_.steps() + step);
        trainer_.set_learning_rate(static_cast<float>(rate));
        epoch_rate_sum_ += rate;
      }
      data_.load(trainer_, step);
    };
    l.after_epoch = [this](const EpochStats& e) { return after_epoch(e); };
    return l;
  }

  nlohmann::json metrics() const;

 private:
  double since_start() const {
    return trainer_.clock().elapsed_us(run_start_, trainer_.clock().mark()) * 1e-6;
  }
  bool after_epoch(const EpochStats& epoch);

  Trainer& trainer_;
  Communicator& comm_;
  EpochData& data_;
  const ConvergenceOptions& o_;
  MlLog* log_;
  Mark run_start_;
  nlohmann::json accuracies_ = nlohmann::json::array(), epoch_seconds_ = nlohmann::json::array(),
                 epoch_losses_ = nlohmann::json::array(), epoch_ends_ = nlohmann::json::array();
  std::optional<int64_t> diverged_at_;
  double accuracy_ = 0, train_seconds_ = 0, run_seconds_ = 0;
  int64_t images_ = 0, epochs_ = 0;
  std::optional<double> time_to_accuracy_;
  double epoch_rate_sum_ = 0;         // this epoch's steps' learning rates
  std::vector<double> step_seconds_;  // every training step's, this rank's
  nlohmann::json epoch_rates_ = nlohmann::json::array();
};

bool ToAccuracy::after_epoch(const EpochStats& epoch) {
  const int64_t e = epoch.epoch;
  const nlohmann::json at = {{"epoch_num", e}};
  const double seconds = comm_.max_across_ranks(epoch.seconds);
  step_seconds_.insert(step_seconds_.end(), epoch.step_seconds.begin(), epoch.step_seconds.end());
  const double mean_loss = comm_.sum_across_ranks(epoch.mean_loss()) / comm_.size();
  if (log_) log_->end("epoch_stop", nullptr, at);
  if (log_) log_->start("eval_start", nullptr, at);
  // One model for the evaluation: rank 0's running statistics; every rank counts its share.
  trainer_.broadcast_buffers();
  const double correct = comm_.sum_across_ranks(static_cast<double>(data_.count_correct(trainer_)));
  accuracy_ = correct / static_cast<double>(data_.test_samples());
  if (log_) log_->event("eval_accuracy", accuracy_, at);
  if (log_) log_->end("eval_stop", nullptr, at);
  epochs_ = e;
  if (o_.lr) {
    epoch_rates_.push_back(epoch_rate_sum_ / static_cast<double>(epoch.steps));
    epoch_rate_sum_ = 0;
  }
  train_seconds_ += seconds;
  // Every rank's steps: with asynchronous SGD their counts differ.
  images_ += static_cast<int64_t>(comm_.sum_across_ranks(static_cast<double>(epoch.steps))) *
             trainer_.batch();
  accuracies_.push_back(accuracy_);
  epoch_seconds_.push_back(seconds);
  if (comm_.rank() == 0) {
    fmt::print("epoch {}/{}: loss {:.4f}, test accuracy {:.2f}% ({:.2f} s)\n", e, o_.max_epochs,
               mean_loss, 100 * accuracy_, seconds);
  }
  epoch_losses_.push_back(mean_loss);  // NaN and inf are written as null
  run_seconds_ = since_start();
  epoch_ends_.push_back(run_seconds_);  // on time to accuracy's clock: evaluations included
  if (!std::isfinite(mean_loss)) {
    diverged_at_ = e;  // no later epoch can recover: stop here
    return false;
  }
  if (o_.target_accuracy && accuracy_ >= *o_.target_accuracy) time_to_accuracy_ = run_seconds_;
  return !time_to_accuracy_;
}

nlohmann::json ToAccuracy::metrics() const {
  const bool reached = !o_.target_accuracy || time_to_accuracy_.has_value();
  if (log_) log_->end("run_stop", nullptr, {{"status", reached ? "success" : "aborted"}});
  const bool writer = comm_.rank() == 0;
  if (writer) {
    fmt::print("test accuracy {:.2f}% on {} {} after {} epochs\n", 100 * accuracy_,
               data_.test_samples(), data_.test_name(), epochs_);
  }
  nlohmann::json m = {{"test_accuracy", accuracy_},
                      {"test_samples", data_.test_samples()},
                      {"train_seconds", train_seconds_},
                      {"throughput_img_s", images_ / train_seconds_},
                      {"median_step_s", percentile(step_seconds_, 50)},
                      {"epoch_mean_losses", epoch_losses_}};
  if (diverged_at_) m["diverged_at_epoch"] = *diverged_at_;
  if (o_.lr) {
    m["learning_rate"] = {{"base", o_.lr->base()},
                          {"k", o_.lr->k()},
                          {"warmup_steps", o_.lr->warmup_steps()},
                          {"warmup_epochs", o_.lr->warmup_epochs()},
                          {"epoch_mean", epoch_rates_}};
  }
  if (!o_.target_accuracy) return m;
  m["convergence"] = {
      {"target_accuracy", *o_.target_accuracy},
      {"reached", reached},
      {"status", reached ? "success" : "aborted"},
      {"epochs", epochs_},
      {"max_epochs", o_.max_epochs},
      {"time_to_accuracy_s", time_to_accuracy_ ? nlohmann::json(*time_to_accuracy_) : nullptr},
      {"run_seconds", run_seconds_},
      {"eval_accuracy", accuracies_},
      {"epoch_train_seconds", epoch_seconds_},
      {"epoch_end_seconds", epoch_ends_}};
  if (writer && reached) {
    fmt::print("reached {:.2f}% in {:.2f} s ({} epochs)\n", 100 * *o_.target_accuracy,
               *time_to_accuracy_, epochs_);
  } else if (writer) {
    fmt::print("did not reach {:.2f}% in {} epochs ({:.2f} s)\n", 100 * *o_.target_accuracy,
               epochs_, run_seconds_);
  }
  return m;
}

}  // namespace

std::unique_ptr<EpochData> digits_epochs(const DigitsSplit& digits, int64_t batch, Shard shard,
                                         uint64_t seed) {
  return std::make_unique<DigitsEpochs>(digits, batch, shard, seed);
}

nlohmann::json train_to_accuracy(Trainer& trainer, Communicator& comm, EpochData& data,
                                 const ConvergenceOptions& o, MlLog* log) {
  if (log) log->start("run_start");
  ToAccuracy run(trainer, comm, data, o, log);
  trainer.train(run.loop());
  return run.metrics();
}

}  // namespace dlb
