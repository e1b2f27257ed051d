// One training step (forward, softmax cross-entropy, backward, SGD update) and timed runs of
// many. Throughput is images in the timed steps over their wall time, with the device
// synchronised, as DESIGN.md defines it.
#pragma once
#include <functional>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/comm/communicator.h"
#include "runtime/nn/graph.h"
#include "runtime/overlap/grad_sync.h"
#include "runtime/trace/tracer.h"

namespace dlb {

struct TrainConfig {
  SgdConfig sgd;
  Precision precision = Precision::kFp32;
  uint64_t seed = 0;
  // Data parallelism: gradients are averaged across the communicator's ranks by the overlap
  // strategy (runtime/overlap/grad_sync.h). Null: one rank.
  Communicator* comm = nullptr;
  OverlapStrategy overlap = OverlapStrategy::kNone;
  double bucket_mb = 25;
  // Test-only: called between forward and backward with the step's index.
  std::function<void(int64_t)> mid_step_hook;
};

struct RunStats {
  int64_t warmup_steps = 0, timed_steps = 0, images_per_step = 0;
  double timed_seconds = 0;
  std::vector<double> step_seconds;  // timed steps only
  std::vector<float> losses;         // every step, warm-up included
  double throughput() const;         // images per second over the timed steps
};

class Trainer {
 public:
  // `graph` must be set up on `backend`. Throws Unsupported if the backend cannot train in the
  // requested precision.
  Trainer(Backend& backend, Graph& graph, const TrainConfig& config);

  // Copies one batch from the host onto the backend.
  void load_batch(const float* images, const int64_t* labels);
  // A full step on the loaded batch; returns its loss (this synchronises).
  float train_step();
  // Inference-mode forward on the loaded batch; how many of the first `count` samples the
  // model classifies correctly.
  int64_t count_correct(int64_t count);
  // `warmup` untimed steps, then `steps` timed ones, on the loaded batch.
  RunStats run(int64_t warmup, int64_t steps);

  int64_t batch() const { return batch_; }
  // Makes every rank's parameters and buffers rank 0's, then checks that they agree (CommError
  // if they do not).
  void broadcast_weights();
  // Makes every rank's buffers (batch-norm running statistics) rank 0's, as DDP's
  // broadcast_buffers does: each rank's statistics follow its own data, and an evaluation that
  // is split across ranks needs one model.
  void broadcast_buffers();
  // FNV-1a over the bytes of every parameter: equal across ranks iff the weights are.
  uint64_t weights_checksum();
  // All-gathers the checksums (a collective: every rank must call it).
  bool weights_identical_across_ranks();
  // Applies every pending update (the forward strategy defers them to the next forward).
  void flush() { grad_sync_->flush(); }
  const GradSync& grad_sync() const { return *grad_sync_; }
  // Spans of the steps inside the tracer's window (null: no tracing). Steps count from 0 over
  // every train_step call, warm-up included.
  void set_tracer(Tracer* tracer) {
    tracer_ = tracer;
    grad_sync_->set_tracer(tracer);
  }

 private:
  void broadcast_state(bool buffers_only);

  Backend& backend_;
  Graph& graph_;
  TrainConfig config_;
  int64_t batch_, classes_;
  Tensor labels_, probs_, loss_;
  std::vector<Param*> params_;
  std::vector<Tensor> momentum_;
  std::unique_ptr<Communicator> own_comm_;  // local, when the config has none
  std::unique_ptr<GradSync> grad_sync_;
  uint64_t step_ = 0;
  Tracer* tracer_ = nullptr;
};

}  // namespace dlb
