#include "workloads/data/epochs.h"

#include <fmt/format.h>

#include <chrono>
#include <numeric>

#include "runtime/core/error.h"

namespace dlb {

EpochResult train_epoch(Trainer& trainer, const Dataset& data, Rng& rng) {
  const int64_t b = trainer.batch();
  if (data.size() < b) {
    throw InvalidArgument(
        fmt::format("batch {} is larger than the {} training samples", b, data.size()));
  }
  std::vector<int64_t> order(data.size());
  std::iota(order.begin(), order.end(), 0);
  for (int64_t i = data.size() - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
  std::vector<float> images(b * data.image_elems());
  std::vector<int64_t> labels(b);
  EpochResult r;
  const auto t0 = std::chrono::steady_clock::now();
  double loss_sum = 0;
  for (int64_t start = 0; start + b <= data.size(); start += b) {
    data.gather({order.begin() + start, order.begin() + start + b}, images.data(), labels.data());
    trainer.load_batch(images.data(), labels.data());
    loss_sum += trainer.train_step();
    ++r.steps;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.mean_loss = loss_sum / static_cast<double>(r.steps);
  return r;
}

double evaluate_accuracy(Trainer& trainer, const Dataset& data) {
  const int64_t b = trainer.batch();
  std::vector<float> images(b * data.image_elems());
  std::vector<int64_t> labels(b);
  int64_t correct = 0;
  for (int64_t start = 0; start < data.size(); start += b) {
    const int64_t n = std::min(b, data.size() - start);
    std::vector<int64_t> idx(b);
    // A short last batch is padded with its first sample; only the real ones are counted.
    for (int64_t i = 0; i < b; ++i) idx[i] = start + (i < n ? i : 0);
    data.gather(idx, images.data(), labels.data());
    trainer.load_batch(images.data(), labels.data());
    correct += trainer.count_correct(n);
  }
  return static_cast<double>(correct) / static_cast<double>(data.size());
}

}  // namespace dlb
