// The executor's observers of a training step's passes (runtime/train/executor.h): the tracer's
// spans, and a test's hook after each pass.
#pragma once
#include <cstddef>
#include <functional>

#include "runtime/trace/tracer.h"
#include "runtime/train/executor.h"

namespace dlb {

// The tracer's spans of the executor's passes: each traced pass, named by its runner, in its
// category (pass_name, or the sync policy's) on its lane. A copy's time is its own queue's
// (PassRunner::lane_marks), not the issuing pass's.
class TracedPasses final : public PassObserver {
 public:
  explicit TracedPasses(Tracer& tracer) : tracer_(tracer) {}
  bool wants_marks() const override { return tracer_.active(); }
  void pass_ran(const Step& step, const PassRunner& runner, const Mark& start,
                const Mark& end) override;

 private:
  Tracer& tracer_;
};

// A hook called after each pass with the pass's index in `schedule` (TrainConfig::
// after_pass_hook), then the next observer (if any).
class HookedPasses final : public PassObserver {
 public:
  HookedPasses(const Schedule& schedule, const std::function<void(size_t)>& hook,
               PassObserver* next)
      : schedule_(schedule), hook_(hook), next_(next) {}
  bool wants_marks() const override { return true; }
  void pass_ran(const Step& step, const PassRunner& runner, const Mark& start,
                const Mark& end) override;

 private:
  const Schedule& schedule_;
  const std::function<void(size_t)>& hook_;
  PassObserver* next_;
};

}  // namespace dlb
