// Gradient synchronisation (DESIGN.md, GradSync; SEEDS.md section 1). Gradients live in one flat
// buffer in reverse layer order; buckets are contiguous slices of it, the first 1 MiB (as PyTorch
// DDP) and the rest about bucket_mb, identical on every rank because they follow the model.
//   none:     after backward, one all-reduce of the whole buffer, then every update.
//   backward: a bucket's all-reduce starts as soon as its last gradient is written, while backward
//             goes on; after backward, wait for all, then every update.
//   forward:  as backward, and each bucket is updated on its own once reduced; the next step's
//             forward of a layer waits only for the buckets holding its parameters.
// MPI's non-blocking collectives progress only inside MPI calls, so in-flight all-reduces are
// polled between layers (poll()).
// Ordering goes through the backend's stream (runtime/core/stream_ref.h): an all-reduce starts
// after the work queued on it, and an update is queued after CommHandle::order_before. On the
// CPU both are the host and order_before waits; on a GPU they are event waits between the compute
// and comm streams, with no host synchronisation inside the step.
#pragma once
#include <memory>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/comm/communicator.h"
#include "runtime/nn/graph.h"
#include "runtime/overlap/strategy.h"
#include "runtime/trace/tracer.h"

namespace dlb {

class GradSync : public GraphObserver {
 public:
  struct Bucket {
    int64_t begin = 0, count = 0;  // elements of the flat gradient buffer
    std::vector<size_t> params;    // indices into the optimizer's parameter list
    int64_t ready_needed = 0;      // parameters whose gradient must be written
    // per step
    int64_t ready = 0;
    std::unique_ptr<CommHandle> handle;
    bool reduced = true, updated = true;  // nothing pending before the first backward
    double launched_us = 0;
  };

  // `params` and `momentum` are the optimizer's lists (parameter i uses momentum[i]).
  GradSync(Graph& graph, Communicator& comm, Backend& backend, OverlapStrategy strategy,
           double bucket_mb, const SgdConfig& sgd, std::vector<Param*> params,
           std::vector<Tensor*> momentum);

  void set_tracer(Tracer* tracer) { tracer_ = tracer; }
  // GraphObserver: the forward strategy's per-layer wait, and launching/polling in backward.
  void before_forward(int node) override;
  void after_backward_node(int node) override;
  // Before backward: every bucket becomes pending for this step.
  void begin_backward();
  // After backward: reduce (none), wait (backward), and update -- or, for forward, nothing yet.
  void after_backward();
  // Completes every pending reduction and update (the end of a run, before reading weights).
  void flush();

  const std::vector<Bucket>& buckets() const { return buckets_; }

 private:
  void on_weights_ready(int node);
  void poll();
  void launch(Bucket& b);
  void complete(Bucket& b);     // order its update after its all-reduce
  void record_finished();       // record the spans of the reductions known to have finished
  bool reduced_now(Bucket& b);  // completes it if its all-reduce has finished; never waits
  void update(Bucket& b);
  bool distributed() const { return comm_.size() > 1; }

  Graph& graph_;
  Communicator& comm_;
  Backend& backend_;
  OverlapStrategy strategy_;
  SgdConfig sgd_;
  std::vector<Param*> params_;
  std::vector<Tensor*> momentum_;
  std::vector<Bucket> buckets_;
  std::vector<std::vector<size_t>> node_params_;   // node -> parameter indices
  std::vector<std::vector<size_t>> node_buckets_;  // node -> buckets holding its parameters
  std::vector<size_t> param_bucket_;               // parameter -> bucket
  Tracer* tracer_ = nullptr;
  // Reductions ordered before their updates whose end time is not yet known (on a GPU: until
  // a later poll finds their event complete).
  struct Finishing {
    std::unique_ptr<CommHandle> handle;
    double launched_us = 0;
    int64_t count = 0;
  };
  std::vector<Finishing> finishing_;
};

}  // namespace dlb
