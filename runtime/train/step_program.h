// The training step as data (docs/architecture.md, "The step"): build_step turns a declared model
// and a StepSpec into a StepProgram, which holds its own tensor table (the model's, then the
// step's), its schedule and its bucket plan. Nothing is allocated and no backend is called: the
// Trainer plans and binds the program, and the what-if simulator (runtime/sim/) replays the same
// program's schedule on a virtual clock.
//
// Each technique is a transform of the program, applied in the one order kStepTransforms states:
// the loss, the step's own state, the optimizer's state, loss scaling, the memory plan's
// reordering, recomputation, swapping, and the sync policy's passes. A transform declares what
// it needs in the program's table and rewrites its schedule; one the spec does not ask for leaves
// the program as it was.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/nn/graph.h"
#include "runtime/nn/memory_plan.h"
#include "runtime/nn/schedule.h"
#include "runtime/overlap/bucket_plan.h"
#include "runtime/overlap/sync_schedule.h"
#include "runtime/train/step_spec.h"

namespace dlb {

// What the step's backend and loop add to the spec's choices.
struct StepTarget {
  // The backend copies input asynchronously (Backend::async_input_copies): the step has a
  // second input buffer, which the next batch is copied into while a step computes.
  bool second_input = false;
  // Losses kept on the device before a read-back (TrainConfig::loss_readback_steps).
  int64_t loss_readback_steps = 64;
  // --swap=auto: the device bytes the step may take (the budget less what the device holds).
  size_t swap_room = 0;
  // This rank, of StepSpec::ranks: under --sync=async rank 0's step holds the parameter
  // server's tensors (AsyncTensors, runtime/overlap/sync_schedule.h).
  int64_t rank = 0;
};

// The program's own tensors, by id in its table (-1: the spec has none), and the model's that
// the step's runners read.
struct StepTensorIds {
  int images = -1, logits = -1, logits_grad = -1;  // the model's input, output and its gradient
  int gradients = -1;                              // the model's flat gradient buffer
  int labels = -1, probs = -1, loss = -1;
  int loss_history = -1;  // one loss per step since the last read-back
  // The step's index on the device, advanced by the step's own work (dropout's draws).
  int step_counter = -1;
  int second_images = -1, second_labels = -1;  // StepTarget::second_input
  std::vector<int> momentum;                   // per flat parameter
  int loss_scale = -1;                         // fp16: the loss scaler's state
  std::vector<int> stale_slots;                // --sync=stale:K: K slots; step t uses t mod K
  int meeting = -1;                            // --sync=independent: the ranks' token
  AsyncTensors async;                          // --sync=async: the host copies
};

struct StepProgram {
  StepSpec spec;
  StepTarget target;
  // Every tensor of the step: the model's (Graph::tensor_infos(), the same ids), then the
  // step's, in the order the transforms declared them.
  std::vector<TensorInfo> tensors;
  Schedule schedule;
  BucketPlan buckets;  // over the model's flat gradient buffer
  StepTensorIds ids;
  std::vector<int> kept;             // what no plan may free: the logits, which a step dump reads
  std::vector<int> swapped;          // the activations the swap transform sends to host memory
  std::vector<std::string> applied;  // the transforms that changed the program, in order
};

// The program of one training step of `model` (declared, not necessarily bound) under `spec`.
// Throws what StepSpec::validate throws for a spec whose choices do not go together, and
// InvalidArgument for a model not declared. Pure: the same arguments give the same program.
StepProgram build_step(const Graph& model, const StepSpec& spec, const StepTarget& target);

// Evaluation as a program: the step's forward passes alone, in the step's order, on the step's
// table (so the step's plan and binding hold for it: each activation is written before it is read,
// as in the step), with no loss, backward or sync. The Trainer runs it in inference mode
// (Trainer::count_correct).
StepProgram evaluation_program(const StepProgram& step);

// Where the program's tensors are stored: naive_plan, or reuse_plan with its reordering for a
// reusing spec (runtime/nn/memory_plan.h). The logits are kept whole (StepProgram::kept).
// std::logic_error where the lanes could touch bytes the plan shares out of order
// (runtime/nn/lane_order.h): a defect of the plan.
MemoryPlan plan_step(const StepProgram& program);

// The program as text (`dlbench run --print-step`): the spec, the transforms applied, every pass
// (index, lane, what it reads and writes, the passes it runs after), every tensor (kind, shape,
// dtype, category, and where `plan` stores it) and the plan's totals.
std::string program_text(const StepProgram& program, const Graph& model, const MemoryPlan& plan);

// A transform: the program with one technique applied (or unchanged, where the spec does not ask
// for it).
struct StepTransform {
  const char* name;
  StepProgram (*apply)(StepProgram program, const Graph& model);
};
// The transforms build_step applies, in order.
extern const std::vector<StepTransform> kStepTransforms;

// Whether the step has a loss scaler (fp16 activations): its optimizer's first update reads every
// gradient (the inf check), so every wait comes before it (runtime/overlap/sync_schedule.h).
bool loss_scaled(const PrecisionPolicy& policy);

}  // namespace dlb
