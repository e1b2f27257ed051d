#include "runtime/trace/comm_metrics.h"

#include <algorithm>
#include <map>

#include "runtime/core/allreduce_share.h"
#include "runtime/core/intervals.h"
#include "runtime/core/stats.h"

namespace dlb {

CommTimes comm_times(const std::vector<Span>& spans) {
  std::vector<Interval> steps, comm, compute;
  for (const Span& s : spans) {
    const Interval iv{s.start_us, s.start_us + s.duration_us};
    if (s.category == kStepCategory) {
      steps.push_back(iv);
    } else if (s.lane == Lane::kComm && s.category == "allreduce") {
      comm.push_back(iv);
    } else if (s.lane == Lane::kCompute) {
      compute.push_back(iv);
    }
  }
  const std::vector<Interval> windows = merged(steps);
  const std::vector<Interval> comm_in = intersected(merged(comm), windows);
  const double hidden_us = length(intersected(comm_in, merged(compute)));
  const double comm_us = length(comm_in);
  return {comm_us * 1e-6, (comm_us - hidden_us) * 1e-6, hidden_us * 1e-6};
}

nlohmann::json comm_metrics(const Tracer& tracer, int ranks) {
  std::map<double, std::vector<double>> busbw_by_bytes;
  const double factor = allreduce_share(ranks);
  for (const Span& s : tracer.spans()) {
    if (s.lane == Lane::kComm && s.category == "allreduce" && s.duration_us > 0 && !s.clipped &&
        s.bytes > 0) {
      // A clipped span's time is not the operation's; independent ranks' meeting moves no
      // gradient bytes.
      busbw_by_bytes[s.bytes].push_back(s.bytes / (s.duration_us * 1e-6) * factor / 1e9);
    }
  }
  const double steps = static_cast<double>(std::max<int64_t>(tracer.traced_steps(), 1));
  const CommTimes t = comm_times(tracer.spans());
  nlohmann::json buckets = nlohmann::json::array();
  for (const auto& [bytes, bw] : busbw_by_bytes) {
    buckets.push_back(
        {{"bytes", bytes}, {"count", bw.size()}, {"median_busbw_gbs", percentile(bw, 50)}});
  }
  return {{"traced_steps", tracer.traced_steps()},
          {"comm_s", t.comm_s / steps},
          {"comm_exposed_s", t.exposed_s / steps},
          {"comm_hidden_s", t.hidden_s / steps},
          {"overlap", t.comm_s > 0 ? t.hidden_s / t.comm_s : 0.0},
          {"allreduce_busbw_by_size", buckets}};
}

}  // namespace dlb
