// Downpour-style asynchronous SGD (--sync=async; Dean et al. 2012, "Large Scale Distributed Deep
// Networks"): rank 0 is a parameter server as well as a worker. It holds the master weights and
// their momentum in host memory, and applies each gradient it receives alone, as it arrives,
// with SGD with momentum at the run's rate. Every rank, rank 0 included:
//   pull (before the first forward pass): takes the weights its last push brought back (rank 0:
//        the master weights as they are);
//   push (after backward): sends its gradients to rank 0 and asks for the weights that result
//        (rank 0 applies its own at once).
// Rank 0 serves the other ranks' pushes at its progress passes (after each forward and backward
// pass) and at its push: those that have come, as many as there are other ranks at most, so that
// however fast they push, its own step goes on. A rank waits only for rank 0 to serve its own push,
// never for the others: a slow rank slows no one but itself (or everyone, if it is rank 0).
//
// Non-blocking point-to-point messages (MPI_Isend, MPI_Irecv, MPI_Iprobe on a communicator of
// their own), not one-sided RMA: SGD with momentum needs the server to compute on each
// gradient, which an MPI_Accumulate cannot do, and Open MPI's one-sided progress over TCP
// needs the target inside MPI anyway.
//
// An epoch of a data set (start_epoch) is its worth of pushes from all ranks together: each rank
// steps at its own pace until rank 0 has counted them, so a fast rank takes more steps than a
// slow one, as Downpour's replicas do. Rank 0's reply to a push says whether the epoch is done.
//
// An update's staleness is how many updates the master weights took between the pull its
// gradient was computed on and its own. Weights and gradients go through host memory on every
// backend (on a GPU, copies each step). A flush (an epoch's end; the end of a run) is
// collective: rank 0 serves every push outstanding, then broadcasts the master weights, which
// every rank takes; a flush with no push since the last does nothing.
//
// A rank that stops answering is noticed by rank 0 as the run goes on, not at the next flush:
// one that has pushed nothing for the communicator's timeout (--comm-timeout) while rank 0
// still serves is a CommError naming it. The other ranks' waits for rank 0 end at the timeout.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/comm/communicator.h"
#include "runtime/memory/allocator.h"
#include "runtime/nn/graph.h"
#include "runtime/nn/schedule.h"
#include "runtime/optim/optimizer.h"
#include "runtime/overlap/sync_schedule.h"

namespace dlb {

class ParamServer final : public PassRunner {
 public:
  // `optimizer`: its settings (rate, momentum, weight decay) as they are at each update; its
  // own state is not used. `tensors`: the host copies, tensors of the step's table (`graph`
  // bound with it as `step`) that insert_sync declared for this rank (sync_schedule.h); zeroed
  // here. fp32 weights and gradients only (StepSpec::validate refuses any other precision;
  // std::logic_error here, as for tensors that are not this rank's).
  ParamServer(const Graph& graph, const BoundStep& step, Backend& backend, Communicator& comm,
              const Optimizer& optimizer, const AsyncTensors& tensors);
  ~ParamServer() override;

  // The policy's pull, push and progress passes (sync_schedule.h).
  void run_pass(const Step& step, const LayerContext* ctx) override;
  const std::string& label(const Step& step) const override;
  bool traced(const Step& step) const override;
  void flush();
  // The next epoch ends once `pushes` pushes, over every rank, have been applied.
  void start_epoch(int64_t pushes);
  // Whether this rank takes no more steps in the epoch (after start_epoch); a rank other than 0
  // waits for the reply to its last push to know.
  bool epoch_done();

  int ranks() const { return comm_.size(); }
  // Rank 0: the staleness of every update applied so far, in order.
  const std::vector<int64_t>& staleness() const { return staleness_; }

 private:
  void pull();
  void push();
  void serve();              // rank 0: every push waiting
  void serve_one(int from);  // rank 0: the next push of one rank (waited for, with a timeout)
  // rank 0: whether rank r has a push still to come: in an epoch, until a reply told it the
  // epoch is done; otherwise while it has pushed fewer times than rank 0 (every rank pushes once
  // a step, and one ahead of rank 0 may be waiting at the end of the run).
  bool owes_push(size_t r) const;
  // rank 0: CommError when a rank that owes a push has sent none for the timeout.
  void check_silence() const;
  void apply(const Tensor& grad, int64_t staleness);
  void take_reply();  // the other ranks: wait for the reply to the last push, and take it
  void load_weights(const Tensor& flat);   // the host copy into the graph's parameters
  void store_weights(Tensor& flat) const;  // the graph's parameters into a host copy

  const Graph& graph_;
  const BoundStep& step_;
  Backend& backend_;
  Communicator& comm_;
  const Optimizer& optimizer_;
  int64_t numel_ = 0;
  // rank 0: master_, momentum_; every rank: grads_; the other ranks: weights_ (the reply).
  Tensor master_, momentum_, grads_, weights_;
  std::vector<Tensor> replies_;                       // rank 0: a reply buffer per rank
  std::vector<std::unique_ptr<CommHandle>> sending_;  // rank 0: a reply in flight per rank
  std::vector<int64_t> received_, version_sent_;      // rank 0: per rank
  std::vector<bool> stopped_;  // rank 0, in an epoch: its reply told the rank the epoch is done
  // rank 0: when each rank's last push came (or the epoch, or the last flush, began).
  std::vector<std::chrono::steady_clock::time_point> heard_;
  int64_t epoch_target_ = 0, epoch_pushes_ = 0;  // rank 0: pushes the epoch takes, and applied
  bool told_done_ = false;                       // the other ranks: the last reply's word
  std::unique_ptr<CommHandle> send_, recv_;      // the other ranks: the push in flight
  int64_t version_ = 0, pulled_version_ = 0, pushes_ = 0, pushes_since_flush_ = 0;
  bool started_ = false;
  std::vector<int64_t> staleness_;
};

}  // namespace dlb
