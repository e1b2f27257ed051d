#include "runtime/train/captured_steps.h"

#include <fmt/format.h>

#include "runtime/core/error.h"

namespace dlb {

void CapturedSteps::replay(int slot, const std::function<void()>& work) {
  if (scratch_ != backend_.scratch_generation()) {
    for (auto& captured : captured_) captured.reset();
    scratch_ = backend_.scratch_generation();
  }
  std::unique_ptr<CapturedWork>& captured = captured_[slot];
  if (!captured) captured = capture(work);
  captured->replay();
  ++stats_.replayed_steps;
}

std::unique_ptr<CapturedWork> CapturedSteps::capture(const std::function<void()>& work) {
  // A graph keeps the addresses it was captured with: memory allocated while capturing (and
  // released later) could be handed to another tensor while replays still write it. The eager
  // first step has made every buffer the step needs, so capturing allocates nothing.
  const uint64_t allocations = backend_.allocator().allocations();
  try {
    backend_.begin_capture();
    work();
  } catch (const Unsupported& e) {  // a call the capture refused (the CUDA backend: 900-908)
    backend_.abandon_capture();
    throw Unsupported(fmt::format("--cuda-graph: the step could not be captured: {}", e.what()));
  } catch (...) {
    backend_.abandon_capture();
    throw;
  }
  std::unique_ptr<CapturedWork> graph = backend_.end_capture();
  if (const uint64_t made = backend_.allocator().allocations() - allocations; made > 0) {
    throw Unsupported(fmt::format(
        "--cuda-graph: the step allocated memory {} times while it was captured; a graph must "
        "replay on memory that stays its own",
        made));
  }
  if (stats_.graphs++ == 0) stats_.operations = graph->operations();
  return graph;
}

}  // namespace dlb
