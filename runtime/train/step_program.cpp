#include "runtime/train/step_program.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <utility>

#include "runtime/core/error.h"
#include "runtime/memory/allocator.h"
#include "runtime/nn/lane_order.h"
#include "runtime/nn/recompute.h"
#include "runtime/nn/reorder.h"
#include "runtime/nn/swap.h"
#include "runtime/optim/loss_scaler.h"
#include "runtime/optim/optimizer.h"
#include "runtime/overlap/sync_schedule.h"

namespace dlb {

namespace {

int declare(StepProgram& p, const char* name, TensorKind kind, const Shape& shape, DType dtype,
            MemCategory category, Layout layout = Layout::kNCHW) {
  TensorInfo info{name, kind, shape, dtype, -1, -1, category};
  info.layout = layout;
  return declare_tensor(p.tensors, std::move(info));
}

// Each pass's kind and node, in order: what a reordering changes.
std::vector<std::pair<Pass, int>> pass_order(const Schedule& s) {
  std::vector<std::pair<Pass, int>> out;
  for (const Step& step : s.steps) out.emplace_back(step.pass, step.node);
  return out;
}

// Forward, softmax cross-entropy (reads the logits and the labels, writes the output's
// gradient), backward. The labels come with the batch, as the input does.
StepProgram with_loss(StepProgram p, const Graph& model) {
  const int64_t batch = model.shape(model.input())[0];
  p.ids.images = model.output_id(model.input());
  p.ids.logits = model.output_id(model.output());
  p.ids.logits_grad = model.grad_id(model.output());
  p.ids.gradients = model.flat_gradient_id();
  p.ids.labels = declare(p, "labels", TensorKind::kInput, {batch}, DType::kI64, MemCategory::kData);
  p.ids.probs = declare(p, "softmax probabilities", TensorKind::kLoss, model.shape(model.output()),
                        DType::kF32, MemCategory::kActivations);
  p.ids.loss = declare(p, "loss", TensorKind::kLoss, {1}, DType::kF32, MemCategory::kActivations);
  Step loss;
  loss.pass = Pass::kLoss;
  loss.node = model.output();
  loss.reads = {p.ids.logits, p.ids.labels};
  loss.writes = {p.ids.logits_grad, p.ids.probs, p.ids.loss};
  p.schedule = model.forward_schedule();
  p.schedule.steps.push_back(std::move(loss));
  const Schedule& backward = model.backward_schedule();
  p.schedule.steps.insert(p.schedule.steps.end(), backward.steps.begin(), backward.steps.end());
  p.applied.push_back("loss");
  return p;
}

// The loss history, the step counter and, where input is copied while a step computes, the
// second input buffer (under the budget and in the setup's peak).
StepProgram with_step_state(StepProgram p, const Graph& model) {
  p.ids.loss_history =
      declare(p, "losses not yet read", TensorKind::kLoss, {p.target.loss_readback_steps},
              DType::kF32, MemCategory::kActivations);
  p.ids.step_counter = declare(p, "step counter", TensorKind::kBuffer, {1}, DType::kI64,
                               MemCategory::kOptimizerState);
  if (p.target.second_input) {
    const TensorInfo in = p.tensors[model.output_id(model.input())];  // a copy
    p.ids.second_images = declare(p, "input, second buffer", TensorKind::kInput, in.shape, in.dtype,
                                  MemCategory::kData, in.layout);
    p.ids.second_labels = declare(p, "labels, second buffer", TensorKind::kInput, {in.shape[0]},
                                  DType::kI64, MemCategory::kData);
  }
  p.applied.push_back("step state");
  return p;
}

StepProgram with_optimizer_state(StepProgram p, const Graph& model) {
  p.ids.momentum = Optimizer::declare_state(model, p.tensors);
  p.applied.push_back("optimizer state");
  return p;
}

StepProgram with_loss_scaling(StepProgram p, const Graph& model) {
  if (!loss_scaled(model.policy())) return p;
  p.ids.loss_scale = LossScaler::declare_state(p.tensors);
  p.applied.push_back("loss scaling");
  return p;
}

StepProgram with_reordering(StepProgram p, const Graph& model) {
  (void)model;
  if (p.spec.memory_plan != MemoryPlanKind::kReorder) return p;
  Schedule reordered = reorder_backward(p.schedule, p.tensors, p.kept);
  if (pass_order(reordered) != pass_order(p.schedule)) p.applied.push_back("reorder");
  p.schedule = std::move(reordered);
  return p;
}

StepProgram with_recomputation(StepProgram p, const Graph& model) {
  (void)model;
  if (p.spec.recompute.kind == RecomputePolicy::Kind::kNone) return p;
  const size_t passes = p.schedule.steps.size();
  p.schedule = recompute_schedule(p.schedule, p.tensors, p.spec.recompute, p.kept);
  if (p.schedule.steps.size() != passes) p.applied.push_back("recompute");  // passes recomputed
  return p;
}

std::vector<int> chosen_swaps(const StepProgram& p) {
  switch (p.spec.swap.kind) {
    case SwapPolicy::Kind::kNone:
      return {};
    case SwapPolicy::Kind::kAll:
      return swap_candidates(p.schedule, p.tensors, p.kept);
    case SwapPolicy::Kind::kList:
      return named_swaps(p.spec.swap, p.schedule, p.tensors, p.kept);
    case SwapPolicy::Kind::kAuto:
      return auto_swaps(p.schedule, p.tensors, p.target.swap_room, p.kept);
  }
  return {};
}

// The chosen activations wait in host memory between their forward and backward passes, their
// host copies declared in the table.
StepProgram with_swaps(StepProgram p, const Graph& model) {
  (void)model;
  if (p.spec.swap.kind == SwapPolicy::Kind::kNone) return p;
  p.swapped = chosen_swaps(p);
  SwappedSchedule s = swap_schedule(p.schedule, p.tensors, p.swapped);
  for (TensorInfo& host : s.host_copies) declare_tensor(p.tensors, std::move(host));
  p.schedule = std::move(s.schedule);
  if (!p.swapped.empty()) p.applied.push_back("swap");
  return p;
}

// The gradient buckets (the later ones about bucket_mb), then the sync policy's passes over
// them. With a loss scaler the optimizer's first update of a step reads every gradient.
StepProgram with_sync(StepProgram p, const Graph& model) {
  std::vector<int64_t> numels;
  for (const ParamIds& param : model.flat_params()) {
    numels.push_back(p.tensors[param.value].shape.numel());
  }
  p.buckets = make_bucket_plan(model.grad_offsets(), numels, dtype_size(model.policy().gradients),
                               p.spec.bucket_mb);
  const SyncOptions options{p.spec.overlap,      p.spec.ranks,   loss_scaled(model.policy()),
                            p.spec.staleness(),  p.spec.async(), p.target.rank,
                            p.spec.independent()};
  SyncTensors declared = insert_sync(p.schedule, p.tensors, model, p.buckets, options);
  p.ids.stale_slots = std::move(declared.stale_slots);
  p.ids.meeting = declared.meeting;
  p.ids.async = std::move(declared.async);
  p.applied.push_back("sync");
  return p;
}

// The program's lanes must honour its edges (runtime/nn/lane_order.h): the executor issues the
// passes in list order and nothing else orders them. A transform that forgets a wait is a defect
// of dlbench, found here before anything runs.
void require_lane_order(const StepProgram& p, const MemoryPlan* plan = nullptr) {
  const std::vector<std::string> problems = plan ? plan_lane_problems(p.schedule, p.tensors, *plan)
                                                 : lane_order_problems(p.schedule, p.tensors);
  if (problems.empty()) return;
  throw std::logic_error(
      fmt::format("the step's program (transforms: {}) is not ordered on its lanes: {}{}",
                  fmt::join(p.applied, ", "), problems.front(),
                  problems.size() > 1 ? fmt::format(" (and {} more)", problems.size() - 1) : ""));
}

}  // namespace

const std::vector<StepTransform> kStepTransforms = {
    {"loss", with_loss},
    {"step state", with_step_state},
    {"optimizer state", with_optimizer_state},
    {"loss scaling", with_loss_scaling},
    {"reorder", with_reordering},
    {"recompute", with_recomputation},
    {"swap", with_swaps},
    {"sync", with_sync},
};

StepProgram build_step(const Graph& model, const StepSpec& spec, const StepTarget& target) {
  if (!model.is_declared()) {
    throw InvalidArgument("a step is built from a declared model (Graph::declare)");
  }
  spec.validate();
  StepProgram p;
  p.spec = spec;
  p.target = target;
  p.tensors = model.tensor_infos();
  p.kept = {model.output_id(model.output())};
  for (const StepTransform& t : kStepTransforms) p = t.apply(std::move(p), model);
  require_lane_order(p);
  return p;
}

StepProgram evaluation_program(const StepProgram& step) {
  StepProgram p = step;
  p.schedule.steps.clear();
  for (const Step& s : step.schedule.steps) {
    if (s.pass == Pass::kForward) p.schedule.steps.push_back(s);
  }
  link_dependencies(p.schedule, p.tensors);
  p.applied.push_back("evaluation");
  require_lane_order(p);
  return p;
}

bool loss_scaled(const PrecisionPolicy& policy) { return policy.activations == DType::kF16; }

MemoryPlan plan_step(const StepProgram& program) {
  MemoryPlan plan = program.spec.memory_plan == MemoryPlanKind::kNaive
                        ? naive_plan(program.schedule, program.tensors)
                        : reuse_plan(program.schedule, program.tensors, program.kept);
  // Bytes the plan gives two tensors are touched in an order the lanes keep.
  require_lane_order(program, &plan);
  return plan;
}

namespace {

std::string spec_line(const StepProgram& p, const Graph& model) {
  const StepSpec& s = p.spec;
  return fmt::format(
      "step program: batch {}, {}, memory plan {}, recompute {}, swap {}, sync mode {}, overlap "
      "{}, "
      "{} MB buckets, {} rank{}",
      model.shape(model.input())[0], precision_name(s.precision), memory_plan_name(s.memory_plan),
      recompute_name(s.recompute), swap_name(s.swap), sync_mode_name(s.sync),
      overlap_name(s.overlap), s.bucket_mb, s.ranks, s.ranks == 1 ? "" : "s");
}

std::string ids_text(const std::vector<int>& ids) { return fmt::format("{}", fmt::join(ids, ",")); }

// "36@-2": pass 36 of the iteration two back.
std::string carried_text(const std::vector<CarriedEdge>& carried) {
  std::vector<std::string> edges;
  for (const CarriedEdge& e : carried) edges.push_back(fmt::format("{}@-{}", e.pass, e.distance));
  return carried.empty() ? std::string() : fmt::format(" carried[{}]", fmt::join(edges, ","));
}

std::string pass_line(size_t i, const Step& step, const StepProgram& p, const Graph& model) {
  const char* join = step.join == Join::kLanes        ? " (waits)"
                     : step.join == Join::kHost       ? " (host waits)"
                     : step.join == Join::kHostMemory ? " (host memory done)"
                                                      : "";
  return fmt::format("  {:>4} {:<7} {}{}  after[{}]{}\n", i, lane_name(step.lane),
                     describe_step(step, p.tensors, model.node_names()), join, ids_text(step.after),
                     carried_text(step.carried));
}

std::string tensor_line(size_t id, const TensorInfo& t, const MemoryPlan& plan) {
  const int buffer = plan.buffer_of.at(id);
  const std::string where = buffer >= 0
                                ? fmt::format("buffer {} at byte {}", buffer, plan.offset_of[id])
                                : fmt::format("view of {} from element {}", t.alias_of, t.offset);
  return fmt::format("  {:>4} {:<40} {:<15} {:<16} {:<4} {:<16} {}\n", id, t.name,
                     tensor_kind_name(t.kind), t.shape.str(), dtype_name(t.dtype),
                     mem_category_name(t.category), where);
}

}  // namespace

std::string program_text(const StepProgram& p, const Graph& model, const MemoryPlan& plan) {
  std::string out = spec_line(p, model) + "\n";
  out += fmt::format("transforms: {}\n", fmt::join(p.applied, ", "));
  out += fmt::format(
      "passes ({}): index, lane, pass, reads and writes, the passes it runs after (carried: of "
      "an earlier iteration, @-2 two back)\n",
      p.schedule.steps.size());
  for (size_t i = 0; i < p.schedule.steps.size(); ++i) {
    out += pass_line(i, p.schedule.steps[i], p, model);
  }
  const size_t own = model.tensor_infos().size();
  out += fmt::format(
      "tensors ({}: the model's {}, the step's {}): id, name, kind, shape, dtype, category, where "
      "stored\n",
      p.tensors.size(), own, p.tensors.size() - own);
  for (size_t id = 0; id < p.tensors.size(); ++id) out += tensor_line(id, p.tensors[id], plan);
  out += fmt::format("plan: {} buffers, {} on the device, {} in all ({} buckets)\n",
                     plan.buffers.size(), format_bytes(plan.device_bytes()),
                     format_bytes(plan.bytes()), p.buckets.buckets.size());
  return out;
}

}  // namespace dlb
