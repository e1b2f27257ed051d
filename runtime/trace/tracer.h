// Spans of a bounded window of training steps, for Chrome traces and per-layer profiles. One RAII
// TraceScope both pushes an NVTX range (seen by Nsight Systems) and records a span. Outside the
// window a scope records nothing (an NVTX push and pop, and a branch on a flag).
//
// Spans are taken as marks of the tracer's clock (runtime/core/clock.h) and read when first
// asked for, after the caller has synchronized: with the CUDA backend's clock a span's ends are
// events on the compute stream, and an all-reduce's are events on the communicator's stream, so
// every time in the trace is the device's. With the host's clock a mark is the time it was taken.
#pragma once
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/core/clock.h"
#include "runtime/core/lane.h"

namespace dlb {

// Span categories beside the schedule's passes (pass_name in runtime/nn/schedule.h): a
// host-to-device copy, the whole step, and a batch made by the input pipeline's loader.
// suites/schema/result.schema.json exports them all.
inline constexpr const char* kCopyCategory = "copy";
inline constexpr const char* kStepCategory = "step";
inline constexpr const char* kLoaderCategory = "loader";

// A span's bucket: none, or every bucket at once (the `none` strategy's one reduction of the
// whole gradient buffer), or independent ranks' meeting (a reduction of their token, no
// gradient); otherwise the bucket's index in the BucketPlan.
inline constexpr int kMeetingBucket = -3;
inline constexpr int kNoBucket = -2;
inline constexpr int kEveryBucket = -1;

struct Span {
  std::string name;      // a layer's torchvision path, or "loss", "sgd", ...
  std::string category;  // forward, backward_data, backward_weights, loss, optimizer, copy, step
  Lane lane = Lane::kCompute;
  int64_t step = 0;
  double start_us = 0, duration_us = 0;
  double bytes = 0;        // all-reduce spans: the bytes reduced; copies: the bytes copied
  bool clipped = false;    // cut at the window's edge: its duration is not the whole operation
  int bucket = kNoBucket;  // an all-reduce's or a sync pass's bucket
  bool layer = false;      // `name` is a layer's (a layer pass, not the loss or the policy's)
  int64_t thread = 0;      // Lane::kLoader: the loader's worker thread (tid kLoader + thread)
};

// A Chrome trace event's args for a span: its step; `pass`, its category, for every span but a
// copy's and the step's (an all-reduce's is "allreduce"); `layer` for a layer pass; `bucket` (a
// number, or "all") and `bytes` where it has them; `clipped` where it was cut at the window's
// edge.
nlohmann::json span_args(const Span& s);

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
  const Clock& clock() const { return *clock_; }
  // A mark of the clock (on a GPU: an event on the compute stream).
  Mark mark() const { return clock_->mark(); }
  // A mark of the host's reading of the time, now or at a steady_clock instant (when a host
  // communicator saw a reduction finish).
  Mark host_mark() const { return Mark{clock_->now_us(), nullptr}; }
  Mark host_mark(std::chrono::steady_clock::time_point t) const {
    return Mark{clock_->from_steady(t), nullptr};
  }
  // A span between two marks, in the current step.
  void record(Span span, const Mark& start, const Mark& end);
  // Work that may cross the window's edges (an all-reduce launched in the step before the window
  // and finished inside it, or launched in its last step and finished after it): only the part
  // inside the window is kept, attributed to the nearest traced step; work wholly outside it is
  // dropped. `wants_edge_work` says whether such work of the current step can still meet the
  // window, so callers record no more than they must.
  int64_t step() const { return step_; }
  // A host instant as a span's time (microseconds since the origin); a host clock's only.
  double host_us(std::chrono::steady_clock::time_point t) const {
    return clock_->from_steady(t) - origin_.us;
  }
  // Whether the clock's marks are a device's (then only device marks can be placed).
  bool on_device() const { return static_cast<bool>(origin_.device); }
  bool wants_edge_work() const {
    return count_ > 0 && step_ >= first_ - 1 && step_ <= first_ + count_;
  }
  // `step`: the step that launched the work (attributed to the nearest traced step).
  void record_clipped(Span span, const Mark& start, const Mark& end, int64_t step);
  // The spans, their marks read (this waits for the device to reach the last of them).
  const std::vector<Span>& spans() const;
  int64_t traced_steps() const;

  // {"traceEvents": [...]} with complete ("X") events, pid = rank, tid = lane (a loader span's:
  // kLoader + its thread), and lane names ("loader 0", "loader 1", ... for the threads seen);
  // "otherData" holds the rank and the wall-clock time of ts = 0 (origin_unix_us).
  nlohmann::json chrome_trace(int rank) const;

 private:
  struct Pending {
    Span span;
    Mark start, end;
    bool clip = false;
  };
  double to_us(const Mark& m) const;  // microseconds since the origin
  void resolve() const;

  int64_t first_, count_;
  int64_t step_ = 0;
  bool active_ = false;
  std::optional<Mark> window_begin_, window_end_;
  SteadyClock steady_;
  const Clock* clock_;
  Mark origin_;            // ts = 0
  double origin_unix_us_;  // the origin on the system clock
  mutable std::vector<Pending> pending_;
  mutable std::vector<Span> spans_;
};

class TraceScope {
 public:
  // `name` must outlive the scope (a node's name, a static string): a temporary is refused.
  // `bytes`: what the span moves (a copy's size), recorded in its args.
  TraceScope(Tracer* tracer, const std::string& name, const char* category,
             Lane lane = Lane::kCompute, double bytes = 0);
  TraceScope(Tracer* tracer, std::string&& name, const char* category, Lane lane = Lane::kCompute,
             double bytes = 0) = delete;
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  Tracer* tracer_;  // null when not recording
  const std::string* name_;
  const char* category_;
  Lane lane_;
  double bytes_;
  Mark start_;
};

}  // namespace dlb
