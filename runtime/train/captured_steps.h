// --cuda-graph (StepSpec::capture): the step's work captured as a graph once per input slot
// (the slot's tensors are in the graph's addresses), and replayed from it; captured again when
// the backend's scratch memory has moved (a workspace grown after the capture), since a graph
// would go on writing memory it no longer owns.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

#include "runtime/backend/backend.h"

namespace dlb {

// What --cuda-graph did in a run: graphs captured (one per input buffer used, and again after the
// backend's scratch memory moved), the operations in the first, and the steps replayed from them.
struct StepGraphStats {
  int64_t graphs = 0, operations = 0, replayed_steps = 0;
};

class CapturedSteps {
 public:
  explicit CapturedSteps(Backend& backend) : backend_(backend) {}
  // One step: the graph of input slot `slot` replayed, `work` (the step's work, queued op by op)
  // captured first where the slot has none or the scratch memory moved.
  void replay(int slot, const std::function<void()>& work);
  const StepGraphStats& stats() const { return stats_; }

 private:
  // Unsupported where the backend refuses a call while capturing, or where the work allocates
  // (a graph keeps the addresses it was captured with).
  std::unique_ptr<CapturedWork> capture(const std::function<void()>& work);

  Backend& backend_;
  std::unique_ptr<CapturedWork> captured_[2];
  uint64_t scratch_ = 0;  // the backend's scratch_generation they hold
  StepGraphStats stats_;
};

}  // namespace dlb
