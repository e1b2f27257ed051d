// Training to a target test accuracy, timed as MLPerf times it: from run_start (after
// initialisation) to the evaluation that first reaches the target, evaluations included. On the
// digits in memory, or a folder's JPEGs through the input pipeline (EpochData).
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "runtime/optim/lr_schedule.h"
#include "runtime/train/trainer.h"
#include "suites/harness/run/epochs.h"
#include "suites/harness/run/mllog.h"
#include "workloads/data/dataset.h"

namespace dlb {

struct ConvergenceOptions {
  int64_t max_epochs = 1;
  std::optional<double> target_accuracy;  // none: train all max_epochs
  uint64_t seed = 0;                      // shuffling
  // The learning rate of each step (set on the trainer before it), over this run's epochs.
  const LrRule* lr = nullptr;
};

// What a run's MLPerf log states about it before run_start (submission_*, hyperparameters,
// samples). The division is "open": dlbench's benchmarks are not MLPerf's.
struct MlLogFacts {
  std::string benchmark, platform, precision, config_file;
  int64_t batch = 0, ranks = 1, train_samples = 0, eval_samples = 0;
  uint64_t seed = 0;
  float lr = 0, momentum = 0, weight_decay = 0;  // lr: the base, after scaling
  // The learning-rate rule, as MLPerf's ResNet rules name its parts: the warm-up's epochs, the
  // schedule after it, and a step schedule's boundaries.
  double warmup_epochs = 0;
  LrSchedule schedule;
};
void log_submission(MlLog& log, const MlLogFacts& facts);

// What epochs train and evaluate on: each rank's batch of each step, and its share of the test
// set's correct answers.
class EpochData {
 public:
  virtual ~EpochData() = default;
  virtual int64_t steps() const = 0;  // whole global batches an epoch
  virtual void begin_epoch() = 0;     // before each epoch (a shuffle)
  virtual void load(Trainer& trainer, int64_t step) = 0;
  // Of this rank's share of the test set (every rank's together count each sample once), in
  // inference mode.
  virtual int64_t count_correct(Trainer& trainer) = 0;
  virtual int64_t train_samples() const = 0;
  virtual int64_t test_samples() const = 0;
  virtual std::string test_name() const = 0;  // "held-out digits"
};

// The digits: shuffled by `seed` each epoch, the same order on every rank (epochs.h's slices).
std::unique_ptr<EpochData> digits_epochs(const DigitsSplit& digits, int64_t batch, Shard shard,
                                         uint64_t seed);

// Trains epoch by epoch, evaluates after each, stops at the target. With several ranks each trains
// on its shard of every global batch, and the evaluation is split across them after rank 0's
// batch-norm statistics are broadcast; every rank sees the same accuracy, so all stop together.
// Logs run_start ... run_stop (status success, or aborted when the target was not reached) when
// `log` is given. Returns the record's metrics: test_accuracy, throughput_img_s (training images /
// training seconds), train_seconds, and "convergence" (target, reached, time_to_accuracy_s,
// per-epoch accuracy), and with a learning-rate rule "learning_rate" (its base, k, warm-up, and
// each epoch's mean rate).
nlohmann::json train_to_accuracy(Trainer& trainer, Communicator& comm, EpochData& data,
                                 const ConvergenceOptions& options, MlLog* log);

}  // namespace dlb
