// Epoch loops over a host data set: shuffled minibatches for training (the last partial batch is
// dropped, as DataLoader(drop_last=True) does) and a full pass for test accuracy. With several
// data-parallel ranks, each takes its shard: every rank shuffles alike (same seed), and rank r
// trains on the r-th slice of `batch` samples of each global batch of batch x ranks, as
// DistributedSampler gives each rank its part; evaluation deals the test batches round-robin.
#pragma once
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

EpochResult train_epoch(Trainer& trainer, const Dataset& data, Rng& shuffle_rng, Shard shard = {});
// How many samples of this shard of `data` the model classifies correctly, in inference mode.
// Summed over every rank's shard, it counts each sample of `data` once.
int64_t count_correct(Trainer& trainer, const Dataset& data, Shard shard = {});
// Fraction of `data` classified correctly (one rank).
double evaluate_accuracy(Trainer& trainer, const Dataset& data);

}  // namespace dlb
