#include "runtime/trace/tracer.h"

#include <algorithm>
#include <set>

#include "runtime/trace/nvtx.h"

namespace dlb {

const char* lane_name(Lane lane) {
  switch (lane) {
    case Lane::kCompute:
      return "compute";
    case Lane::kComm:
      return "comm";
    case Lane::kCopy:
      return "copy";
    case Lane::kHost:
      return "host";
  }
  return "?";
}

Tracer::Tracer(int64_t first_step, int64_t count, const Clock* clock)
    : first_(first_step),
      count_(count),
      clock_(clock ? clock : &steady_),
      origin_us_(clock_->now_us()),
      origin_unix_us_(std::chrono::duration<double, std::micro>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count()) {}

double Tracer::now_us() const { return clock_->now_us() - origin_us_; }

double Tracer::to_us(std::chrono::steady_clock::time_point t) const {
  return clock_->from_steady(t) - origin_us_;
}

void Tracer::begin_step(int64_t step) {
  const bool in = step >= first_ && step < first_ + count_;
  if (in && !active_ && window_begin_us_ < 0) window_begin_us_ = now_us();
  if (!in && active_ && window_end_us_ < 0) window_end_us_ = now_us();
  active_ = in;
  step_ = step;
}

void Tracer::end_window() {
  if (active_ && window_end_us_ < 0) window_end_us_ = now_us();
  active_ = false;
}

bool Tracer::overlaps(double start_us, double end_us) const {
  if (window_begin_us_ < 0 || count_ == 0) return false;
  return end_us > window_begin_us_ && (window_end_us_ < 0 || start_us < window_end_us_);
}

void Tracer::record_clipped(Span span) {
  const double end = span.start_us + span.duration_us;
  const double start = std::max(span.start_us, window_begin_us_);
  const double stop = window_end_us_ < 0 ? end : std::min(end, window_end_us_);
  span.clipped = start != span.start_us || stop != end;
  span.start_us = start;
  span.duration_us = std::max(stop - start, 0.0);
  span.step = std::clamp(step_, first_, first_ + count_ - 1);
  spans_.push_back(std::move(span));
}

void Tracer::record(Span span) {
  span.step = step_;
  spans_.push_back(std::move(span));
}

int64_t Tracer::traced_steps() const {
  std::set<int64_t> steps;
  for (const Span& s : spans_) steps.insert(s.step);
  return static_cast<int64_t>(steps.size());
}

nlohmann::json Tracer::chrome_trace(int rank) const {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", rank},
                    {"tid", 0},
                    {"args", {{"name", "rank " + std::to_string(rank)}}}});
  for (Lane lane : kLanes) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", rank},
                      {"tid", static_cast<int>(lane)},
                      {"args", {{"name", lane_name(lane)}}}});
  }
  for (const Span& s : spans_) {
    events.push_back({{"name", s.name},
                      {"cat", s.category},
                      {"ph", "X"},
                      {"ts", s.start_us},
                      {"dur", s.duration_us},
                      {"pid", rank},
                      {"tid", static_cast<int>(s.lane)},
                      {"args", s.clipped ? nlohmann::json{{"step", s.step}, {"clipped", true}}
                                         : nlohmann::json{{"step", s.step}}}});
  }
  // Span times are relative to this process's origin; the origin's wall-clock time lets a reader
  // put several ranks' traces on one time axis.
  return {{"traceEvents", events},
          {"displayTimeUnit", "ms"},
          {"otherData", {{"rank", rank}, {"origin_unix_us", origin_unix_us_}}}};
}

TraceScope::TraceScope(Tracer* tracer, const std::string& name, const char* category, Lane lane)
    : tracer_(tracer && tracer->active() ? tracer : nullptr),
      name_(&name),
      category_(category),
      lane_(lane) {
  // Nsight Systems sees every scope, inside the window or not (an NVTX push without a profiler
  // attached costs a call); spans are recorded only inside the window.
  nvtx_push(name.c_str());
  if (tracer_) start_us_ = tracer_->now_us();
}

TraceScope::~TraceScope() {
  nvtx_pop();
  if (!tracer_) return;
  const double end = tracer_->now_us();
  tracer_->record(Span{*name_, category_, lane_, 0, start_us_, end - start_us_});
}

}  // namespace dlb
