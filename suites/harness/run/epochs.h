// Epoch loops over a host data set: shuffled minibatches for training (the last partial batch is
// dropped, as DataLoader(drop_last=True) does) and a full pass for test accuracy. With several
// data-parallel ranks, each takes its shard: every rank shuffles alike (same seed), and rank r
// trains on the r-th slice of `batch` samples of each global batch of batch x ranks, as
// DistributedSampler gives each rank its part; evaluation deals the test batches round-robin.
#pragma once
#include <functional>
#include <vector>

#include "runtime/train/trainer.h"
#include "workloads/data/dataset.h"

namespace dlb {

struct Shard {
  int rank = 0, ranks = 1;
};

struct EpochResult {
  int64_t steps = 0;
  double mean_loss = 0;  // this rank's
  double seconds = 0;
};

// One epoch's minibatches for Trainer::train's load hook: the samples in an order shuffled per
// epoch, this shard's slice of each global batch.
class EpochBatches {
 public:
  // InvalidArgument when one global batch (batch x ranks) is larger than `data`.
  EpochBatches(const Dataset& data, int64_t batch, Shard shard);
  int64_t steps() const;  // whole global batches in the data
  void shuffle(Rng& rng);
  // Step `step`'s slice; past the epoch's steps, round again from the first.
  void load(Trainer& trainer, int64_t step);

 private:
  const Dataset& data_;
  int64_t batch_;
  Shard shard_;
  std::vector<int64_t> order_;
  std::vector<float> images_;
  std::vector<int64_t> labels_;
};

// One epoch of Trainer::train over `data`, shuffled by `shuffle_rng`.
EpochResult train_epoch(Trainer& trainer, const Dataset& data, Rng& shuffle_rng, Shard shard = {});
// Fills a batch's images (NCHW f32) and labels with samples `indices`.
using GatherBatch =
    std::function<void(const std::vector<int64_t>& indices, float* images, int64_t* labels)>;
// How many of `samples` test samples the model classifies correctly, in inference mode, over
// this shard's batches of them: rank r takes batches r, r + ranks, ...; a short last batch is
// padded with its first sample, and only the real ones are counted.
int64_t count_correct_in_batches(Trainer& trainer, int64_t samples, int64_t image_elems,
                                 Shard shard, const GatherBatch& gather);
// How many samples of this shard of `data` the model classifies correctly, in inference mode.
// Summed over every rank's shard, it counts each sample of `data` once.
int64_t count_correct(Trainer& trainer, const Dataset& data, Shard shard = {});
// Fraction of `data` classified correctly (one rank).
double evaluate_accuracy(Trainer& trainer, const Dataset& data);

}  // namespace dlb
