#include "runtime/train/evaluation.h"

#include <algorithm>
#include <vector>

#include "runtime/core/half.h"

namespace dlb {

Evaluation::Evaluation(Backend& backend, Graph& graph, const BoundStep& step,
                       const StepProgram& program, const Clock& clock)
    : backend_(backend),
      step_(step),
      logits_(program.ids.logits),
      labels_(program.ids.labels),
      executor_(evaluation_program(program).schedule, PassRunners{&graph}, clock) {}

int64_t Evaluation::count_correct(int64_t count, int64_t index) {
  const LayerContext ctx{backend_, false, 0};
  executor_.run(index, &ctx);
  const Tensor& out = step_.tensor(logits_);
  const int64_t batch = out.shape()[0], classes = out.shape()[1];
  std::vector<unsigned char> stored(out.bytes());
  std::vector<float> logits(out.numel());
  std::vector<int64_t> labels(batch);
  backend_.copy_to_host(out, stored.data());
  dtype_to_floats(stored.data(), out.numel(), out.dtype(), logits.data());
  backend_.copy_to_host(step_.tensor(labels_), labels.data());
  int64_t correct = 0;
  for (int64_t i = 0; i < std::min(count, batch); ++i) {
    const float* row = logits.data() + i * classes;
    const int64_t best = std::max_element(row, row + classes) - row;
    correct += best == labels[i];
  }
  return correct;
}

}  // namespace dlb
