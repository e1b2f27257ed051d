// Asynchronous SGD replayed over its ranks (docs/simulation.md, "Asynchronous SGD"): every rank's
// own replay (runtime/train/replay.h) against one parameter server, rank 0, as runtime/overlap/
// param_server.h runs it:
//   - a rank's push is sent when its copy to the host ends, and reaches rank 0 at once;
//   - rank 0 serves at each progress pass and after its own push: the pushes that have reached
//     it, and those that reach it while it serves, as many as there are other ranks at most;
//     earliest sent first (then the lower rank): an assumption, since MPI_Iprobe on any source
//     promises no order. Serving one receives its gradients (the transfer: a large message moves
//     once its receive is posted), applies them and copies the weights into the reply, one
//     after another on rank 0's clock;
//   - the reply leaves when the push is applied, on rank 0's outgoing link, one reply after
//     another; the rank's next pull waits for it.
// The ranks are coupled only through rank 0: whenever rank 0 serves at time t, every other rank
// is first replayed on until it waits for a reply or its last push was sent after t, so every
// push sent by t is known. Each rank's speed is drawn per iteration as the simulator's are.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/nn/schedule.h"
#include "runtime/sim/simulator.h"
#include "runtime/train/replay.h"

namespace dlb {

struct AsyncRun {
  // A step is every rank's worth of pushes (o.ranks of them, whoever pushed them): the time
  // between the server's applying the last push of one step and the last of the next. The
  // warm-up's steps are dropped; the others are timed.
  std::vector<double> step_us;
  // Per iteration over every rank's iterations that ended in the timed steps: the busy time and
  // the waits for replies.
  double mean_busy_us = 0, mean_waited_us = 0;
  // Rank 0's passes that began in the timed steps (its first and last iterations there may be
  // partial).
  std::vector<TimedPass> timeline;
};

// `o.ranks` ranks (2 to kMaxAsyncRanks) of `step` (an asynchronous SGD schedule), until the
// server has applied o.warmup + o.iterations steps' pushes (then rank 0 ends its iteration, and
// serves no more). InvalidArgument when the server's costs are missing.
AsyncRun replay_async(const Schedule& step, const PassCost& cost, const SimulateOptions& o);

}  // namespace dlb
