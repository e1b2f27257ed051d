// Where the step's times come from (docs/architecture.md, "The step"). The executor, the
// tracer and the trainer read time only through a Clock: the host's steady clock now; CUDA events
// on the GPU's streams with the CUDA backend; a virtual clock that a simulator (or a test)
// advances, replaying the same schedule.
#pragma once
#include <chrono>

namespace dlb {

class Clock {
 public:
  virtual ~Clock() = default;
  // Microseconds since this clock's origin.
  virtual double now_us() const = 0;
  // A steady_clock instant (when a communicator saw a reduction finish) on this clock.
  virtual double from_steady(std::chrono::steady_clock::time_point t) const = 0;
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

 private:
  double now_us_ = 0;
};

}  // namespace dlb
