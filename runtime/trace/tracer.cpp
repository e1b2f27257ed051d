#include "runtime/trace/tracer.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "runtime/core/error.h"
#include "runtime/core/nvtx.h"

namespace dlb {

Tracer::Tracer(int64_t first_step, int64_t count, const Clock* clock)
    : first_(first_step),
      count_(count),
      clock_(clock ? clock : &steady_),
      origin_(clock_->mark()),
      origin_unix_us_(std::chrono::duration<double, std::micro>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count()) {}

double Tracer::to_us(const Mark& m) const {
  // Device marks are read on the device's clock from the origin's event; host marks on the
  // host's, from the time the origin was taken. The two timelines are not mixed.
  if (static_cast<bool>(m.device) != static_cast<bool>(origin_.device)) {
    throw InvalidArgument("tracer: a mark of another clock (device and host marks mixed)");
  }
  if (m.device) return clock_->elapsed_us(origin_, m);
  return m.us - origin_.us;
}

void Tracer::begin_step(int64_t step) {
  const bool in = step >= first_ && step < first_ + count_;
  if (in && !active_ && !window_begin_) window_begin_ = mark();
  if (!in && active_ && !window_end_) window_end_ = mark();
  active_ = in;
  step_ = step;
}

void Tracer::end_window() {
  if (active_ && !window_end_) window_end_ = mark();
  active_ = false;
}

void Tracer::record(Span span, const Mark& start, const Mark& end) {
  span.step = step_;
  pending_.push_back({std::move(span), start, end, false});
}

void Tracer::record_clipped(Span span, const Mark& start, const Mark& end, int64_t step) {
  if (count_ <= 0) return;
  span.step = std::clamp(step, first_, first_ + count_ - 1);
  pending_.push_back({std::move(span), start, end, true});
}

void Tracer::resolve() const {
  if (pending_.empty()) return;
  const double begin = window_begin_ ? to_us(*window_begin_) : 0;
  const double finish = window_end_ ? to_us(*window_end_) : 0;
  for (Pending& p : pending_) {
    Span s = std::move(p.span);
    // The duration from the two marks directly: a device's elapsed time between events keeps
    // its resolution however far from the origin they are.
    const double start = to_us(p.start);
    const double end =
        start +
        std::max(p.end.device ? clock_->elapsed_us(p.start, p.end) : p.end.us - p.start.us, 0.0);
    if (p.clip) {
      if (!window_begin_ || end <= begin || (window_end_ && start >= finish)) continue;
      const double a = std::max(start, begin), b = window_end_ ? std::min(end, finish) : end;
      s.clipped = a != start || b != end;
      s.start_us = a;
      s.duration_us = std::max(b - a, 0.0);
    } else {
      s.start_us = start;
      s.duration_us = end - start;
    }
    spans_.push_back(std::move(s));
  }
  pending_.clear();
}

const std::vector<Span>& Tracer::spans() const {
  resolve();
  return spans_;
}

int64_t Tracer::traced_steps() const {
  std::set<int64_t> steps;
  for (const Span& s : spans()) steps.insert(s.step);
  return static_cast<int64_t>(steps.size());
}

nlohmann::json span_args(const Span& s) {
  nlohmann::json args = {{"step", s.step}};
  if (s.category != kCopyCategory && s.category != kStepCategory && s.category != kLoaderCategory) {
    args["pass"] = s.category;
  }
  if (s.layer) args["layer"] = s.name;
  if (s.bucket >= 0) args["bucket"] = s.bucket;
  if (s.bucket == kEveryBucket) args["bucket"] = "all";
  if (s.bucket == kMeetingBucket) args["bucket"] = "meeting";
  if (s.bytes > 0) args["bytes"] = s.bytes;
  if (s.clipped) args["clipped"] = true;
  return args;
}

nlohmann::json Tracer::chrome_trace(int rank) const {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", rank},
                    {"tid", 0},
                    {"args", {{"name", "rank " + std::to_string(rank)}}}});
  const auto thread_name = [&](int64_t tid, const std::string& name) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", rank},
                      {"tid", tid},
                      {"args", {{"name", name}}}});
  };
  std::set<int64_t> loader_threads;
  for (const Span& s : spans()) {
    if (s.lane == Lane::kLoader) loader_threads.insert(s.thread);
  }
  for (Lane lane : kLanes) {
    if (lane != Lane::kLoader) thread_name(static_cast<int>(lane), lane_name(lane));
  }
  for (int64_t t : loader_threads) {
    thread_name(static_cast<int>(Lane::kLoader) + t, fmt::format("loader {}", t));
  }
  for (const Span& s : spans()) {
    const int64_t tid = static_cast<int>(s.lane) + (s.lane == Lane::kLoader ? s.thread : 0);
    events.push_back({{"name", s.name},
                      {"cat", s.category},
                      {"ph", "X"},
                      {"ts", s.start_us},
                      {"dur", s.duration_us},
                      {"pid", rank},
                      {"tid", tid},
                      {"args", span_args(s)}});
  }
  // Span times are relative to this process's origin; the origin's wall-clock time lets a reader
  // put several ranks' traces on one time axis.
  return {{"traceEvents", events},
          {"displayTimeUnit", "ms"},
          {"otherData", {{"rank", rank}, {"origin_unix_us", origin_unix_us_}}}};
}

TraceScope::TraceScope(Tracer* tracer, const std::string& name, const char* category, Lane lane,
                       double bytes)
    : tracer_(tracer && tracer->active() ? tracer : nullptr),
      name_(&name),
      category_(category),
      lane_(lane),
      bytes_(bytes) {
  // Nsight Systems sees every scope, inside the window or not (an NVTX push without a profiler
  // attached costs a call); spans are recorded only inside the window.
  nvtx_push(name.c_str());
  if (tracer_) start_ = tracer_->mark();
}

TraceScope::~TraceScope() {
  nvtx_pop();
  if (!tracer_) return;
  Span span{*name_, category_, lane_};
  span.bytes = bytes_;
  tracer_->record(std::move(span), start_, tracer_->mark());
}

}  // namespace dlb
