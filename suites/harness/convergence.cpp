#include "suites/harness/convergence.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "suites/harness/epochs.h"

namespace dlb {

void log_submission(MlLog& log, const MlLogFacts& f) {
  log.event("submission_org", "dlbench");
  log.event("submission_platform", f.platform);
  log.event("submission_division", "open");
  log.event("submission_status", "research");
  log.event("submission_benchmark", f.benchmark);
  log.event("cache_clear", false);  // dlbench does not drop OS caches; the digits are in memory
  log.event("seed", f.seed);
  log.event("global_batch_size", f.batch * f.ranks);
  log.event("micro_batch_size", f.batch);
  log.event("gradient_accumulation_steps", 1);
  log.event("train_samples", f.train_samples);
  log.event("eval_samples", f.eval_samples);
  log.event("opt_name", "sgd");
  log.event("opt_base_learning_rate", f.lr);
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

nlohmann::json train_to_accuracy(Trainer& trainer, Communicator& comm, const DigitsSplit& digits,
                                 const ConvergenceOptions& o, MlLog* log) {
  using clock = std::chrono::steady_clock;
  const auto since = [](clock::time_point t) {
    return std::chrono::duration<double>(clock::now() - t).count();
  };
  if (log) log->start("run_start");
  const auto run_start = clock::now();
  Rng shuffle(o.seed + 1);  // the same on every rank: each takes its slice of one order
  const Shard shard{comm.rank(), comm.size()};
  const bool writer = comm.rank() == 0;
  nlohmann::json accuracies = nlohmann::json::array(), epoch_seconds = nlohmann::json::array(),
                 epoch_losses = nlohmann::json::array();
  std::optional<int64_t> diverged_at;
  double accuracy = 0, train_seconds = 0;
  int64_t images = 0, epochs = 0;
  std::optional<double> time_to_accuracy;
  for (int64_t e = 1; e <= o.max_epochs && !time_to_accuracy; ++e) {
    const nlohmann::json at = {{"epoch_num", e}};
    if (log) log->start("epoch_start", nullptr, at);
    EpochResult r = train_epoch(trainer, digits.train, shuffle, shard);
    r.seconds = comm.max_across_ranks(r.seconds);
    r.mean_loss = comm.sum_across_ranks(r.mean_loss) / comm.size();
    if (log) log->end("epoch_stop", nullptr, at);
    if (log) log->start("eval_start", nullptr, at);
    // One model for the evaluation: rank 0's running statistics; every rank counts its share.
    trainer.broadcast_buffers();
    const double correct =
        comm.sum_across_ranks(static_cast<double>(count_correct(trainer, digits.test, shard)));
    accuracy = correct / static_cast<double>(digits.test.size());
    if (log) log->event("eval_accuracy", accuracy, at);
    if (log) log->end("eval_stop", nullptr, at);
    epochs = e;
    train_seconds += r.seconds;
    images += r.steps * trainer.batch() * comm.size();
    accuracies.push_back(accuracy);
    epoch_seconds.push_back(r.seconds);
    if (writer) {
      fmt::print("epoch {}/{}: loss {:.4f}, test accuracy {:.2f}% ({:.2f} s)\n", e, o.max_epochs,
                 r.mean_loss, 100 * accuracy, r.seconds);
    }
    epoch_losses.push_back(r.mean_loss);  // NaN and inf are written as null
    if (!std::isfinite(r.mean_loss)) {
      diverged_at = e;  // no later epoch can recover: stop here
      break;
    }
    if (o.target_accuracy && accuracy >= *o.target_accuracy) time_to_accuracy = since(run_start);
  }
  const double run_seconds = since(run_start);
  const bool reached = !o.target_accuracy || time_to_accuracy.has_value();
  if (log) log->end("run_stop", nullptr, {{"status", reached ? "success" : "aborted"}});
  if (writer) {
    fmt::print("test accuracy {:.2f}% on {} held-out digits after {} epochs\n", 100 * accuracy,
               digits.test.size(), epochs);
  }
  nlohmann::json m = {{"test_accuracy", accuracy},
                      {"test_samples", digits.test.size()},
                      {"train_seconds", train_seconds},
                      {"throughput_img_s", images / train_seconds},
                      {"epoch_mean_losses", epoch_losses}};
  if (diverged_at) m["diverged_at_epoch"] = *diverged_at;
  if (o.target_accuracy) {
    m["convergence"] = {
        {"target_accuracy", *o.target_accuracy},
        {"reached", reached},
        {"status", reached ? "success" : "aborted"},
        {"epochs", epochs},
        {"max_epochs", o.max_epochs},
        {"time_to_accuracy_s", time_to_accuracy ? nlohmann::json(*time_to_accuracy) : nullptr},
        {"run_seconds", run_seconds},
        {"eval_accuracy", accuracies},
        {"epoch_train_seconds", epoch_seconds}};
    if (writer && reached) {
      fmt::print("reached {:.2f}% in {:.2f} s ({} epochs)\n", 100 * *o.target_accuracy,
                 *time_to_accuracy, epochs);
    } else if (writer) {
      fmt::print("did not reach {:.2f}% in {} epochs ({:.2f} s)\n", 100 * *o.target_accuracy,
                 epochs, run_seconds);
    }
  }
  return m;
}

}  // namespace dlb
