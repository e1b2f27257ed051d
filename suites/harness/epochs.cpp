#include "suites/harness/epochs.h"

#include <fmt/format.h>

#include <chrono>
#include <numeric>

#include "runtime/core/error.h"

namespace dlb {

EpochResult train_epoch(Trainer& trainer, const Dataset& data, Rng& rng, Shard shard) {
  const int64_t b = trainer.batch(), global = b * shard.ranks;
  if (data.size() < global) {
    throw InvalidArgument(
        fmt::format("the global batch {} ({} x {} ranks) is larger than the {} "
                    "training samples",
                    global, b, shard.ranks, data.size()));
  }
  std::vector<int64_t> order(data.size());
  std::iota(order.begin(), order.end(), 0);
  for (int64_t i = data.size() - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
  std::vector<float> images(b * data.image_elems());
  std::vector<int64_t> labels(b);
  EpochResult r;
  const auto t0 = std::chrono::steady_clock::now();
  double loss_sum = 0;
  for (int64_t start = 0; start + global <= data.size(); start += global) {
    const auto mine = order.begin() + start + shard.rank * b;
    data.gather({mine, mine + b}, images.data(), labels.data());
    trainer.load_batch(images.data(), labels.data());
    trainer.step();
    ++r.steps;
  }
  for (float loss : trainer.take_losses()) loss_sum += loss;  // read back once per epoch
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.mean_loss = loss_sum / static_cast<double>(r.steps);
  return r;
}

int64_t count_correct(Trainer& trainer, const Dataset& data, Shard shard) {
  const int64_t b = trainer.batch();
  std::vector<float> images(b * data.image_elems());
  std::vector<int64_t> labels(b);
  std::vector<int64_t> idx(b);
  int64_t correct = 0;
  for (int64_t start = shard.rank * b; start < data.size(); start += b * shard.ranks) {
    const int64_t n = std::min(b, data.size() - start);
    // A short last batch is padded with its first sample; only the real ones are counted.
    for (int64_t i = 0; i < b; ++i) idx[i] = start + (i < n ? i : 0);
    data.gather(idx, images.data(), labels.data());
    trainer.load_batch(images.data(), labels.data());
    correct += trainer.count_correct(n);
  }
  return correct;
}

double evaluate_accuracy(Trainer& trainer, const Dataset& data) {
  return static_cast<double>(count_correct(trainer, data)) / static_cast<double>(data.size());
}

}  // namespace dlb
