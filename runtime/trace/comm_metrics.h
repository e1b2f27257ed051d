// Communication metrics from a trace window, as docs/metrics.md defines them:
//   comm_total   = sum of all-reduce span durations,
//   comm_exposed = time in which an all-reduce span runs and no compute span does,
//   overlap      = 1 - comm_exposed / comm_total,
//   comm_busy    = time in which at least one all-reduce span runs (buckets in flight together
//                  count once; comm_total counts each, queueing included),
// per traced step, and the bus bandwidth of each bucket size, (bytes / time) x 2(n-1)/n.
// A span runs from launch until its completion is observed (polled between layers on MPI).
#pragma once
#include <nlohmann/json.hpp>

#include "runtime/trace/tracer.h"

namespace dlb {

nlohmann::json comm_metrics(const Tracer& tracer, int ranks);

}  // namespace dlb
