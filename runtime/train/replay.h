// A replay of a schedule on a virtual clock: the seam a what-if simulator implements. The real
// Executor runs the schedule, but its runners compute nothing: each pass advances a VirtualClock
// by the time a cost model gives it, and the sync policy's reductions run on a comm lane of
// their own. The model, as the CPU backend with a progress thread runs a step (and as a GPU's
// compute and comm streams do):
//   - passes on the compute, copy and host lanes run one after another, in schedule order (a
//     swap's copy too: this model does not overlap copies with compute);
//   - an all-reduce starts when it is launched or when the reduction before it ends, whichever
//     is later, and takes its cost on the comm lane while the other lanes go on;
//   - a wait ends when its reduction has ended (at once if it already has) and costs nothing more;
//   - an update of carried gradients (the forward strategy's) runs only when a reduction has
//     happened since the bucket's last update, as GradSync's does: not in the first iteration.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/core/lane.h"
#include "runtime/nn/schedule.h"

namespace dlb {

struct TimedPass {
  int64_t iteration = 0;
  size_t index = 0;  // in the schedule
  Lane lane = Lane::kCompute;
  double start_us = 0, end_us = 0;
};

// Microseconds a pass takes on its lane (a wait's is ignored: it lasts until its reduction ends).
using PassCost = std::function<double(const Step& step)>;

// `iterations` iterations of `schedule`, one after another: every pass that ran, in the order it
// was issued (a skipped carried update is absent). A reduction's times are the comm lane's.
std::vector<TimedPass> replay(const Schedule& schedule, const PassCost& cost, int64_t iterations);

}  // namespace dlb
