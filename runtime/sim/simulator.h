// The what-if simulator (docs/simulation.md): the real step's schedule, with the sync policy's
// passes for N ranks, replayed on a virtual clock per rank (runtime/train/replay.h). Every rank
// runs the same schedule and the same cost model; they differ only in speed: a per-rank,
// per-iteration factor on their compute (a measured jitter distribution, sampled; a named
// straggler). A reduction starts when the last rank has launched it and the reduction before it
// has ended, and takes the network's time (runtime/sim/network.h); every rank's wait for it ends
// then. Ranks of the same speed are replayed once, so N ranks of one speed cost one rank's replay.
//
// An iteration's reductions depend on every rank's launches, and a rank's launches on its waits:
// each iteration is replayed until the reductions' times settle (a fixed point, reached in two or
// three rounds where launches precede the waits for them, as in every strategy's schedule; in
// one round per reduction at most where the reductions take compute from their ranks,
// comm_sharing).
//
// Asynchronous SGD (a schedule that pulls and pushes, runtime/overlap/sync_schedule.h) has no
// common step: every rank is replayed, at its own pace, against one parameter server
// (runtime/sim/server_replay.h).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/nn/schedule.h"
#include "runtime/train/replay.h"

namespace dlb {

struct RankSpeeds {
  // Compute-time factors to draw from, one per rank per iteration (measured step times over their
  // mean); empty: every rank at the cost model's speed. One rank waits for no one, and does not
  // draw: its step is the cost model's.
  std::vector<double> jitter;
  // A rank whose compute takes `straggler_factor` times as long (on top of its jitter); -1: none.
  int64_t straggler = -1;
  double straggler_factor = 1;
  // Every rank's compute this many times slower (ranks sharing a host's cores).
  double compute_factor = 1;
};

// A spread with no measurement behind it: `n` factors at the quantiles (i + 1/2) / n of a normal
// distribution with mean 1 and standard deviation `cv` (at most kMaxNormalJitterCv, which keeps
// the slowest-drawn factor above 0 for any n up to 10^6).
inline constexpr double kMaxNormalJitterCv = 0.2;
std::vector<double> normal_jitter(double cv, int64_t n = 1001);

// Asynchronous SGD's parameter server, rank 0 (runtime/overlap/param_server.h), in microseconds:
// the time it takes to apply one push's gradients (SGD with momentum over every parameter, on the
// host), to copy the master weights into another rank's reply, and to move a push's gradients or
// a reply's weights between rank 0 and rank r. Rank speed does not scale them.
struct ServerCosts {
  double apply_us = 0, reply_copy_us = 0;
  std::function<double(int64_t rank)> transfer_us;
};
// Asynchronous SGD replays every rank: at most this many.
inline constexpr int64_t kMaxAsyncRanks = 4096;

struct SimulateOptions {
  int64_t ranks = 1;
  int64_t warmup = 2, iterations = 20;  // untimed iterations, then timed ones
  uint64_t seed = 0;                    // the jitter's draws
  RankSpeeds speeds;
  bool keep_timeline = true;  // rank 0's passes in the timed iterations (a simulated trace)
  // How each reduction shares the cores that compute (reduction_sharing(); none where empty).
  SharingOf comm_sharing;
  ServerCosts server;  // asynchronous SGD's
};

// Where the time beyond linear scaling goes (docs/metrics.md, "Scaling loss"), per step:
//   step - one_rank = exposed_comm + waiting_for_slowest + compute_slowdown + rest.
// (A compute_factor slows one rank as well: its step is the baseline's times the factor.)
// exposed_comm: a rank's time in waits for reductions had every rank its speed (the ranks'
//               mean, replayed at equal speeds); waiting_for_slowest: what the ranks' different
//               speeds add to the waits; compute_slowdown: the passes' time beyond one rank's
//               (ranks slower than the cost model's speed); rest: what remains (the step's time on
//               its slowest rank beyond the ranks' mean, the sync policy's own passes).
struct ScalingLoss {
  double one_rank_us = 0, step_us = 0;
  double exposed_comm_us = 0, waiting_for_slowest_us = 0, compute_slowdown_us = 0, rest_us = 0;
};

struct Simulation {
  // Each timed iteration: from the end of the iteration before on its last rank to the end of
  // this one on its last rank. Asynchronous SGD: the time the server takes to apply each
  // rank's worth of pushes (runtime/sim/server_replay.h), so that the ranks' images over a step
  // are its throughput.
  std::vector<double> step_us;
  double mean_step_us = 0;
  ScalingLoss loss;
  // Rank 0's timed iterations (keep_timeline); under asynchronous SGD, its passes that began in
  // the timed steps.
  std::vector<TimedPass> timeline;
  int64_t replayed_ranks = 0;  // distinct speeds replayed (asynchronous SGD: every rank)
};

// `step`: the schedule with the sync policy's passes for options.ranks ranks; `one_rank`: the
// same step on one rank (its updates after backward, nothing reduced), the baseline. `cost`:
// every pass's time, an all-reduce's over options.ranks ranks included; a pull's and a push's,
// their copies between the model and the host.
// Asynchronous SGD's loss: exposed_comm is a rank's mean wait for the replies to its pushes, and
// waiting_for_slowest 0 (no rank waits for another's compute); rank 0's serving is in the rest.
Simulation simulate(const Schedule& step, const Schedule& one_rank, const PassCost& cost,
                    const SimulateOptions& options);

}  // namespace dlb
