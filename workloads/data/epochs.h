// Epoch loops over a host data set: shuffled minibatches for training (the last partial batch is
// dropped, as DataLoader(drop_last=True) does) and a full pass for test accuracy.
#pragma once
#include "runtime/train/trainer.h"
#include "workloads/data/dataset.h"

namespace dlb {

struct EpochResult {
  int64_t steps = 0;
  double mean_loss = 0;
  double seconds = 0;
};

EpochResult train_epoch(Trainer& trainer, const Dataset& data, Rng& shuffle_rng);
// Fraction of `data` classified correctly, in inference mode.
double evaluate_accuracy(Trainer& trainer, const Dataset& data);

}  // namespace dlb
