// Spans of a bounded window of training steps, for Chrome traces and per-layer profiles. One RAII
// TraceScope both pushes an NVTX range (seen by Nsight Systems) and records a span. Outside the
// window a scope is one branch on a flag, so tracing off costs nothing measurable.
#pragma once
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dlb {

// Chrome-trace "threads": one lane per stream or host activity.
enum class Lane { kCompute = 0, kComm = 1, kCopy = 2, kHost = 3 };
const char* lane_name(Lane lane);

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
  // Records steps [first_step, first_step + count); count 0 turns recording off.
  Tracer(int64_t first_step, int64_t count);
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
  std::chrono::steady_clock::time_point origin_;
  double origin_unix_us_;  // the origin on the system clock
  std::vector<Span> spans_;
};

class TraceScope {
 public:
  TraceScope(Tracer* tracer, const std::string& name, const char* category,
             Lane lane = Lane::kCompute);
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
