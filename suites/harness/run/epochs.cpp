#include "suites/harness/run/epochs.h"

#include <fmt/format.h>

#include <numeric>

#include "runtime/core/error.h"

namespace dlb {

EpochBatches::EpochBatches(const Dataset& data, int64_t batch, Shard shard)
    : data_(data), batch_(batch), shard_(shard) {
  const int64_t global = batch * shard.ranks;
  if (data.size() < global) {
    throw InvalidArgument(
        fmt::format("the global batch {} ({} x {} ranks) is larger than the {} "
                    "training samples",
                    global, batch, shard.ranks, data.size()));
  }
  order_.resize(static_cast<size_t>(data.size()));
  images_.resize(static_cast<size_t>(batch * data.image_elems()));
  labels_.resize(static_cast<size_t>(batch));
}

int64_t EpochBatches::steps() const { return data_.size() / (batch_ * shard_.ranks); }

void EpochBatches::shuffle(Rng& rng) {
  std::iota(order_.begin(), order_.end(), 0);
  for (int64_t i = data_.size() - 1; i > 0; --i) std::swap(order_[i], order_[rng.below(i + 1)]);
}

void EpochBatches::load(Trainer& trainer, int64_t step) {
  step %= steps();  // a rank that steps faster than the others (asynchronous SGD) goes round
  const auto mine = order_.begin() + step * batch_ * shard_.ranks + shard_.rank * batch_;
  data_.gather({mine, mine + batch_}, images_.data(), labels_.data());
  trainer.load_batch(images_.data(), labels_.data());
}

EpochResult train_epoch(Trainer& trainer, const Dataset& data, Rng& rng, Shard shard) {
  EpochBatches batches(data, trainer.batch(), shard);
  batches.shuffle(rng);
  TrainingLoop loop;
  loop.steps_per_epoch = batches.steps();
  loop.load = [&](int64_t, int64_t step) { batches.load(trainer, step); };
  const EpochStats e = trainer.train(loop).epochs.front();
  return EpochResult{e.steps, e.mean_loss(), e.seconds};
}

int64_t count_correct_in_batches(Trainer& trainer, int64_t samples, int64_t image_elems,
                                 Shard shard, const GatherBatch& gather) {
  const int64_t b = trainer.batch();
  std::vector<float> images(b * image_elems);
  std::vector<int64_t> labels(b);
  std::vector<int64_t> idx(b);
  int64_t correct = 0;
  for (int64_t start = shard.rank * b; start < samples; start += b * shard.ranks) {
    const int64_t n = std::min(b, samples - start);
    // A short last batch is padded with its first sample; only the real ones are counted.
    for (int64_t i = 0; i < b; ++i) idx[i] = start + (i < n ? i : 0);
    gather(idx, images.data(), labels.data());
    trainer.load_batch(images.data(), labels.data());
    correct += trainer.count_correct(n);
  }
  return correct;
}

int64_t count_correct(Trainer& trainer, const Dataset& data, Shard shard) {
  return count_correct_in_batches(trainer, data.size(), data.image_elems(), shard,
                                  [&data](const std::vector<int64_t>& idx, float* images,
                                          int64_t* labels) { data.gather(idx, images, labels); });
}

double evaluate_accuracy(Trainer& trainer, const Dataset& data) {
  return static_cast<double>(count_correct(trainer, data)) / static_cast<double>(data.size());
}

}  // namespace dlb
