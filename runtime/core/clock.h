// Where the step's times come from (docs/architecture.md, "The step"). The executor, the
// tracer and the trainer read time only through a Clock: the host's steady clock; CUDA events on
// the compute stream with the CUDA backend (Backend::clock(), for step boundaries); a virtual
// clock that a simulator (or a test) advances, replaying the same schedule.
#pragma once
#include <chrono>
#include <memory>

namespace dlb {

// The longest wait a duration option may ask for (a collective's timeout, a point's): 2^32 s,
// about 136 years. A steady_clock time point counts int64 nanoseconds, about 292 years, so a
// deadline of now plus this cannot overflow it, however long the machine has been up.
constexpr double kLongestWaitSeconds = 4294967296.0;

// A point in the work queued so far, to be read later: a host clock's time when it was taken;
// a device clock's event, recorded on its stream, which the device reaches when the work before
// it has run.
struct Mark {
  double us = 0;                 // host clocks: the time; device clocks: the host's time taken
  std::shared_ptr<void> device;  // device clocks: the event (destroyed with the last copy)
};

class Clock {
 public:
  virtual ~Clock() = default;
  // Microseconds since this clock's origin, on the host, now.
  virtual double now_us() const = 0;
  // A steady_clock instant (when a communicator saw a reduction finish) on this clock.
  virtual double from_steady(std::chrono::steady_clock::time_point t) const = 0;
  // Where the queued work has reached. A host clock reads now; a device clock records an event
  // and returns at once.
  virtual Mark mark() const { return Mark{now_us(), nullptr}; }
  // Microseconds from `a` to `b`, taken in that order. A device clock waits for both to be
  // reached (and for nothing else).
  virtual double elapsed_us(const Mark& a, const Mark& b) const { return b.us - a.us; }
};

class SteadyClock final : public Clock {
 public:
  SteadyClock() : origin_(std::chrono::steady_clock::now()) {}
  double now_us() const override { return from_steady(std::chrono::steady_clock::now()); }
  double from_steady(std::chrono::steady_clock::time_point t) const override {
    return std::chrono::duration<double, std::micro>(t - origin_).count();
  }

 private:
  std::chrono::steady_clock::time_point origin_;
};

// Time stands still until advanced: what a simulator replays a schedule on.
class VirtualClock final : public Clock {
 public:
  double now_us() const override { return now_us_; }
  // Host instants mean nothing here: they read as the current virtual time.
  double from_steady(std::chrono::steady_clock::time_point) const override { return now_us_; }
  void advance_us(double us) { now_us_ += us; }
  // Back (or on) to a time read from it earlier: exactly that time.
  void set_us(double us) { now_us_ = us; }

 private:
  double now_us_ = 0;
};

}  // namespace dlb
