// Communication metrics from a trace window, as docs/metrics.md defines them. Each is a length
// of time inside the traced steps (the union of their step spans), never a sum of spans:
//   comm         = time in which at least one all-reduce runs (buckets in flight together
//                  count once);
//   comm_exposed = time in which an all-reduce runs and no compute does: what the step waits for;
//   comm_hidden  = time in which an all-reduce runs under compute: comm - comm_exposed;
//   overlap      = comm_hidden / comm (0 without communication);
// each per traced step, and the bus bandwidth of each bucket size, (bytes / time) x 2(n-1)/n.
// A span runs from launch until its completion is observed (polled between layers on MPI), so
// comm includes a bucket's wait behind the one before it: judge a strategy by step time and
// comm_exposed together.
#pragma once
#include <nlohmann/json.hpp>
#include <vector>

#include "runtime/trace/tracer.h"

namespace dlb {

// Seconds over all the traced steps (not yet per step).
struct CommTimes {
  double comm_s = 0, exposed_s = 0, hidden_s = 0;
};

// From hand-made or traced spans: step spans (category "step") bound the windows; all-reduce
// spans (comm lane, category "allreduce") are communication; compute-lane spans are compute.
CommTimes comm_times(const std::vector<Span>& spans);

nlohmann::json comm_metrics(const Tracer& tracer, int ranks);

}  // namespace dlb
