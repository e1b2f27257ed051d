#include "runtime/trace/comm_metrics.h"

#include <algorithm>
#include <map>

#include "runtime/core/stats.h"

namespace dlb {
namespace {

using Interval = std::pair<double, double>;

std::vector<Interval> merged(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const auto& iv : v) {
    if (!out.empty() && iv.first <= out.back().second) {
      out.back().second = std::max(out.back().second, iv.second);
    } else {
      out.push_back(iv);
    }
  }
  return out;
}

// Length of `a` not covered by `b` (both merged, sorted).
double uncovered(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  double total = 0;
  size_t j = 0;
  for (const auto& [start, end] : a) {
    double cursor = start;
    while (j < b.size() && b[j].second <= cursor) ++j;
    for (size_t k = j; k < b.size() && b[k].first < end; ++k) {
      if (b[k].first > cursor) total += b[k].first - cursor;
      cursor = std::max(cursor, b[k].second);
      if (cursor >= end) break;
    }
    if (cursor < end) total += end - cursor;
  }
  return total;
}

}  // namespace

nlohmann::json comm_metrics(const Tracer& tracer, int ranks) {
  std::vector<Interval> comm, compute;
  double total_us = 0;
  std::map<double, std::vector<double>> busbw_by_bytes;
  const double factor = ranks > 1 ? 2.0 * (ranks - 1) / ranks : 0.0;
  for (const Span& s : tracer.spans()) {
    const Interval iv{s.start_us, s.start_us + s.duration_us};
    if (s.lane == Lane::kComm && s.category == "allreduce") {
      comm.push_back(iv);
      total_us += s.duration_us;
      if (s.duration_us > 0 && !s.clipped) {  // a clipped span's time is not the operation's
        busbw_by_bytes[s.bytes].push_back(s.bytes / (s.duration_us * 1e-6) * factor / 1e9);
      }
    } else if (s.lane == Lane::kCompute) {
      compute.push_back(iv);
    }
  }
  const double steps = std::max<int64_t>(tracer.traced_steps(), 1);
  const std::vector<Interval> comm_union = merged(comm);
  const double exposed_us = uncovered(comm_union, merged(compute));
  double busy_us = 0;
  for (const auto& [start, end] : comm_union) busy_us += end - start;
  nlohmann::json buckets = nlohmann::json::array();
  for (const auto& [bytes, bw] : busbw_by_bytes) {
    buckets.push_back(
        {{"bytes", bytes}, {"count", bw.size()}, {"median_busbw_gbs", percentile(bw, 50)}});
  }
  return {{"traced_steps", tracer.traced_steps()},
          {"comm_total_s", total_us * 1e-6 / steps},
          {"comm_exposed_s", exposed_us * 1e-6 / steps},
          {"comm_busy_s", busy_us * 1e-6 / steps},
          {"overlap", total_us > 0 ? 1.0 - exposed_us / total_us : 0.0},
          {"allreduce_busbw_by_size", buckets}};
}

}  // namespace dlb
