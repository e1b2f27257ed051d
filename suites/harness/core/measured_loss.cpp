#include "suites/harness/core/measured_loss.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "runtime/core/error.h"
#include "runtime/core/intervals.h"
#include "runtime/core/lane.h"
#include "runtime/io/json_text.h"
#include "runtime/io/text_file.h"

namespace dlb {

namespace {

// The length of merged list `a` inside [lo, hi].
double inside(const std::vector<Interval>& a, double lo, double hi) {
  return length(intersected(a, {{lo, hi}}));
}

// One rank's trace: its step spans by step, its compute spans, its all-reduces (merged, and each
// launch by step and bucket, in unix microseconds).
struct RankTrace {
  std::map<int64_t, Interval> steps;
  std::vector<Interval> compute, comm;
  std::map<std::pair<int64_t, std::string>, double> launched_unix_us;
};

RankTrace read_trace(const nlohmann::json& trace, const std::string& where) {
  RankTrace t;
  const auto& events = trace.value("traceEvents", nlohmann::json::array());
  const double origin =
      trace.value("otherData", nlohmann::json::object()).value("origin_unix_us", 0.0);
  for (const auto& e : events) {
    if (!e.is_object() || e.value("ph", "") != "X") continue;
    const double ts = e.value("ts", 0.0), dur = e.value("dur", 0.0);
    const std::string cat = e.value("cat", "");
    const int tid = e.value("tid", -1);
    const auto& args = e.value("args", nlohmann::json::object());
    if (cat == "step") {
      t.steps[args.value("step", int64_t{-1})] = {ts, ts + dur};
    } else if (tid == static_cast<int>(Lane::kCompute)) {
      t.compute.emplace_back(ts, ts + dur);
    } else if (cat == "allreduce") {
      t.comm.emplace_back(ts, ts + dur);
      // A reduction cut at the window's start was launched before it: its start is not a launch.
      if (args.value("clipped", false)) continue;
      const std::string bucket = args.contains("bucket") ? args["bucket"].dump() : "?";
      t.launched_unix_us[{args.value("step", int64_t{-1}), bucket}] = origin + ts;
    }
  }
  if (t.steps.empty()) throw InvalidArgument(where + ": a trace without step spans");
  t.compute = merged(std::move(t.compute));
  t.comm = merged(std::move(t.comm));
  return t;
}

struct StepParts {
  double step = 0, busy = 0, idle = 0, exposed = 0;
};

StepParts parts_of(const RankTrace& t, const Interval& s) {
  StepParts p;
  p.step = s.second - s.first;
  p.busy = inside(t.compute, s.first, s.second);
  p.idle = p.step - p.busy;
  // Idle while an all-reduce runs: the all-reduce's time in the step less its time under compute.
  p.exposed = std::max(0.0, inside(t.comm, s.first, s.second) -
                                inside(intersected(t.comm, t.compute), s.first, s.second));
  return p;
}

std::vector<std::string> trace_paths(const nlohmann::json& record) {
  const auto& paths = record.value("paths", nlohmann::json::object());
  if (paths.contains("traces") && paths["traces"].is_array()) {
    return paths["traces"].get<std::vector<std::string>>();
  }
  if (paths.contains("trace") && paths["trace"].is_string()) {
    return {paths["trace"].get<std::string>()};
  }
  return {};
}

// A trace's path as written, or where it moved with the results folder.
std::string locate(const std::string& path, const std::string& dir) {
  if (std::filesystem::exists(path)) return path;
  return dir + "/traces/" + std::filesystem::path(path).filename().string();
}

}  // namespace

nlohmann::json measured_scaling_loss(const std::vector<nlohmann::json>& ranks,
                                     const nlohmann::json& baseline, const std::string& where) {
  const RankTrace base = read_trace(baseline, where + " (the baseline's trace)");
  StepParts one;
  for (const auto& [step, span] : base.steps) {
    const StepParts p = parts_of(base, span);
    one.step += p.step / static_cast<double>(base.steps.size());
    one.busy += p.busy / static_cast<double>(base.steps.size());
    one.idle += p.idle / static_cast<double>(base.steps.size());
  }
  std::vector<RankTrace> traces;
  for (size_t r = 0; r < ranks.size(); ++r) {
    traces.push_back(read_trace(ranks[r], fmt::format("{} (rank {}'s trace)", where, r)));
  }
  for (const RankTrace& t : traces) {
    if (t.steps.size() != traces.front().steps.size() ||
        !std::equal(t.steps.begin(), t.steps.end(), traces.front().steps.begin(),
                    [](const auto& a, const auto& b) { return a.first == b.first; })) {
      throw InvalidArgument(where + ": the ranks' traces hold different steps");
    }
  }
  // The last launch of each step's bucket, over the ranks.
  std::map<std::pair<int64_t, std::string>, double> last;
  for (const RankTrace& t : traces) {
    for (const auto& [key, at] : t.launched_unix_us) {
      auto [it, fresh] = last.emplace(key, at);
      if (!fresh) it->second = std::max(it->second, at);
    }
  }
  double step = 0, busy = 0, idle = 0, exposed = 0, slowest = 0;
  const double n = static_cast<double>(traces.size() * traces.front().steps.size());
  for (const RankTrace& t : traces) {
    for (const auto& [s, span] : t.steps) {
      const StepParts p = parts_of(t, span);
      double lag = 0;
      for (const auto& [key, at] : t.launched_unix_us) {
        if (key.first == s) lag = std::max(lag, last.at(key) - at);
      }
      step += p.step / n;
      busy += p.busy / n;
      idle += p.idle / n;
      exposed += p.exposed / n;
      slowest += std::min(std::max(p.exposed, 0.0), lag) / n;
    }
  }
  const double us = 1e-6;
  return {{"one_rank_step_s", one.step * us},
          {"step_s", step * us},
          {"exposed_comm_s", (exposed - slowest) * us},
          {"waiting_for_slowest_s", slowest * us},
          {"compute_slowdown_s", (busy - one.busy) * us},
          {"rest_s", (idle - exposed - one.idle) * us}};
}

void add_measured_scaling_loss(nlohmann::json& record, const std::vector<nlohmann::json>& recorded,
                               const std::string& dir) {
  if (record.value("status", "") != "ok" || record.value("mode", "") != "measured") return;
  if (record["config"].value("ranks", 1) < 2 || !record.contains("metrics")) return;
  const nlohmann::json& base_id = record["metrics"].value("scaling_baseline", nlohmann::json());
  const std::vector<std::string> paths = trace_paths(record);
  if (base_id.is_null() || paths.size() != record["config"]["ranks"].get<size_t>()) return;
  for (const auto& r : recorded) {
    if (!r.contains("point") || r["point"].value("id", "") != base_id) continue;
    const std::vector<std::string> base_paths = trace_paths(r);
    if (base_paths.empty()) return;
    const auto read = [&](const std::string& p) {
      const std::string path = locate(p, dir);
      return parse_json(read_text_file(path, "trace"), path);
    };
    try {
      std::vector<nlohmann::json> ranks;
      for (const std::string& p : paths) ranks.push_back(read(p));
      record["metrics"]["scaling_loss"] =
          measured_scaling_loss(ranks, read(base_paths.front()),
                                fmt::format("point {}", record["point"].value("id", "?")));
    } catch (const std::exception& e) {
      // A missing or unreadable trace: the record stays without a breakdown, and says why.
      record["metrics"].erase("scaling_loss");
      record["metrics"]["scaling_loss_missing"] = e.what();
    }
    return;
  }
}

}  // namespace dlb
