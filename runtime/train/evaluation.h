// Evaluation (docs/architecture.md, "The step"): the step's evaluation program
// (evaluation_program: its forward passes alone, under its plan) run in inference mode on the
// bound batch, and how many of the batch's samples the model classifies correctly.
#pragma once
#include <cstdint>

#include "runtime/backend/backend.h"
#include "runtime/nn/graph.h"
#include "runtime/train/executor.h"
#include "runtime/train/step_program.h"

namespace dlb {

class Evaluation {
 public:
  // Over `graph`, bound with `program`'s table as `step`; all and `clock` must outlive it.
  Evaluation(Backend& backend, Graph& graph, const BoundStep& step, const StepProgram& program,
             const Clock& clock);
  // The forward passes on the loaded batch (`index`: the caller's count of steps); how many of
  // its first `count` samples the model classifies correctly (the logits' largest is the label).
  int64_t count_correct(int64_t count, int64_t index);

 private:
  Backend& backend_;
  const BoundStep& step_;
  int logits_, labels_;
  Executor executor_;
};

}  // namespace dlb
