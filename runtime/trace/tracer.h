// Spans of a bounded window of training steps, for Chrome traces and per-layer profiles. One RAII
// TraceScope both pushes an NVTX range (seen by Nsight Systems) and records a span. Outside the
// window a scope records nothing (an NVTX push and pop, and a branch on a flag).
#pragma once
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/trace/clock.h"

namespace dlb {

// Chrome-trace "threads": one lane per stream or host activity.
enum class Lane { kCompute = 0, kComm = 1, kCopy = 2, kHost = 3 };
inline constexpr Lane kLanes[] = {Lane::kCompute, Lane::kComm, Lane::kCopy, Lane::kHost};
const char* lane_name(Lane lane);

// Span categories beside the schedule's passes (pass_name in runtime/nn/schedule.h): a
// host-to-device copy, and the whole step. suites/schema/result.schema.json exports them all.
inline constexpr const char* kCopyCategory = "copy";
inline constexpr const char* kStepCategory = "step";

struct Span {
  std::string name;      // a layer's torchvision path, or "loss", "sgd", ...
  std::string category;  // forward, backward_data, backward_weights, loss, optimizer, copy, step
  Lane lane = Lane::kCompute;
  int64_t step = 0;
  double start_us = 0, duration_us = 0;
  double bytes = 0;      // all-reduce spans: the bytes reduced
  bool clipped = false;  // cut at the window's edge: its duration is not the whole operation
};

class Tracer {
 public:
  // Records steps [first_step, first_step + count); count 0 turns recording off. Times come from
  // `clock` (the host's steady clock when null), which must outlive the tracer.
  Tracer(int64_t first_step, int64_t count, const Clock* clock = nullptr);
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;
  void begin_step(int64_t step);
  void end_window();
  bool active() const { return active_; }
  double now_us() const;
  double to_us(std::chrono::steady_clock::time_point t) const;
  void record(Span span);
  // Work that crosses the window's edges (an all-reduce launched in the step before the window
  // and finished inside it, or launched in its last step and finished after it): `overlaps`
  // says whether [start_us, end_us] meets the window; `record_clipped` records the part inside,
  // attributed to the nearest traced step.
  bool overlaps(double start_us, double end_us) const;
  void record_clipped(Span span);
  const std::vector<Span>& spans() const { return spans_; }
  int64_t traced_steps() const;

  // {"traceEvents": [...]} with complete ("X") events, pid = rank, tid = lane, and lane names;
  // "otherData" holds the rank and the wall-clock time of ts = 0 (origin_unix_us).
  nlohmann::json chrome_trace(int rank) const;

 private:
  int64_t first_, count_;
  int64_t step_ = 0;
  bool active_ = false;
  double window_begin_us_ = -1, window_end_us_ = -1;  // -1: not begun / not ended
  SteadyClock steady_;
  const Clock* clock_;
  double origin_us_;       // the clock's time when the tracer started: ts = 0
  double origin_unix_us_;  // the origin on the system clock
  std::vector<Span> spans_;
};

class TraceScope {
 public:
  // `name` must outlive the scope (a node's name, a static string): a temporary is refused.
  TraceScope(Tracer* tracer, const std::string& name, const char* category,
             Lane lane = Lane::kCompute);
  TraceScope(Tracer* tracer, std::string&& name, const char* category,
             Lane lane = Lane::kCompute) = delete;
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  Tracer* tracer_;  // null when not recording
  const std::string* name_;
  const char* category_;
  Lane lane_;
  double start_us_ = 0;
};

}  // namespace dlb
