// The runner of a swapped schedule's passes (runtime/nn/swap.h) on a backend: a copy out or in
// is Backend::swap_copy between the activation and its host copy, whose marks on the copy queue
// it keeps per activation; a wait is Backend::wait_for_copy on that activation's latest copy.
#pragma once
#include <string>
#include <unordered_map>
#include <utility>

#include "runtime/backend/backend.h"
#include "runtime/nn/bound_step.h"

namespace dlb {

class SwapPasses final : public PassRunner {
 public:
  // Passes take their tensors from `step`, which `tensors` (the step's program's table)
  // describes; all must outlive the runner.
  SwapPasses(Backend& backend, const BoundStep& step, const std::vector<TensorInfo>& tensors)
      : backend_(backend), step_(step), tensors_(tensors) {}
  void run_pass(const Step& step, const LayerContext* ctx) override;
  // The swapped tensor's name: an activation's is its layer's (its torchvision path); a saved
  // tensor's adds what it is ("layer1.0.bn1.save_mean").
  const std::string& label(const Step& step) const override;
  // A copy is a span of the copy lane; a wait is none (what it costs is the compute lane's idle
  // time).
  bool traced(const Step& step) const override { return step.pass != Pass::kSwapWait; }
  const std::pair<Mark, Mark>* lane_marks(const Step& step) const override;

 private:
  Backend& backend_;
  const BoundStep& step_;
  const std::vector<TensorInfo>& tensors_;
  std::unordered_map<int, std::pair<Mark, Mark>> copies_;  // by activation: its latest copy
};

}  // namespace dlb
