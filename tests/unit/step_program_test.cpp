// build_step: the step's program holds its own table (the model's tensors, then the step's), the
// model gains nothing from it, its transforms apply in the one stated order, and it is what the
// Trainer runs.
#include "runtime/train/step_program.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/core/error.h"
#include "runtime/train/trainer.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

Graph declared(const char* model, Precision precision = Precision::kFp32, int64_t size = 8) {
  Graph g = build_model(model, ModelConfig{2, size, 10, {}});
  g.declare(PrecisionPolicy::for_precision(precision), BackendTraits{});
  return g;
}

std::vector<std::string> described(const StepProgram& p, const Graph& g) {
  std::vector<std::string> lines;
  for (const Step& s : p.schedule.steps)
    lines.push_back(describe_step(s, p.tensors, g.node_names()));
  return lines;
}

std::vector<std::string> names(const std::vector<TensorInfo>& tensors) {
  std::vector<std::string> out;
  for (const TensorInfo& t : tensors) out.push_back(t.name);
  return out;
}

TEST(BuildStep, DeclaresTheStepsTensorsInItsOwnTableAndTheModelGainsNone) {
  const Graph g = declared("digits-cnn");
  const std::vector<std::string> model = names(g.tensor_infos());
  StepSpec spec;
  spec.memory_plan = MemoryPlanKind::kReuse;
  spec.swap.kind = SwapPolicy::Kind::kAll;
  spec.sync = SyncMode{SyncMode::Kind::kStale, 2};
  spec.ranks = 2;
  const StepProgram p = build_step(g, spec, StepTarget{true, 16, 0});
  EXPECT_EQ(names(g.tensor_infos()), model);
  const std::vector<std::string> table = names(p.tensors);
  ASSERT_GT(table.size(), model.size());
  EXPECT_EQ(std::vector<std::string>(table.begin(), table.begin() + model.size()), model);
  const StepTensorIds& ids = p.ids;
  EXPECT_EQ(table.at(ids.labels), "labels");
  EXPECT_EQ(table.at(ids.probs), "softmax probabilities");
  EXPECT_EQ(table.at(ids.loss), "loss");
  EXPECT_EQ(p.tensors.at(ids.loss_history).shape, Shape{16});
  EXPECT_EQ(table.at(ids.step_counter), "step counter");
  const TensorInfo& input = g.tensor_infos()[g.output_id(g.input())];
  EXPECT_EQ(p.tensors.at(ids.second_images).shape, input.shape);
  EXPECT_EQ(p.tensors.at(ids.second_labels).shape, Shape{2});
  EXPECT_EQ(ids.momentum.size(), g.flat_params().size());
  EXPECT_EQ(ids.loss_scale, -1);  // fp32: no loss scaler
  ASSERT_EQ(ids.stale_slots.size(), 2u);
  EXPECT_EQ(table.at(ids.stale_slots[1]), "stale gradients 1");
  // Each swapped activation's host copy, in the program's table only.
  size_t host_copies = 0;
  for (const TensorInfo& t : p.tensors) host_copies += t.kind == TensorKind::kSwapped;
  EXPECT_FALSE(p.swapped.empty());
  EXPECT_EQ(host_copies, p.swapped.size());
  EXPECT_EQ(check_schedule(p.schedule, p.tensors), std::vector<std::string>{});
}

TEST(BuildStep, AppliesItsTransformsInTheOneOrderAndOnlyThoseThatChangeIt) {
  const std::vector<std::string> every = {"loss",         "step state", "optimizer state",
                                          "loss scaling", "reorder",    "recompute",
                                          "swap",         "sync"};
  std::vector<std::string> stated;
  for (const StepTransform& t : kStepTransforms) stated.push_back(t.name);
  EXPECT_EQ(stated, every);
  const Graph fp16 = declared("resnet18", Precision::kFp16, 32);
  StepSpec all;
  all.precision = Precision::kFp16;
  all.memory_plan = MemoryPlanKind::kReorder;
  all.recompute = *parse_recompute("sqrt");
  all.swap.kind = SwapPolicy::Kind::kAll;
  all.overlap = OverlapStrategy::kBackward;
  all.ranks = 2;
  EXPECT_EQ(build_step(fp16, all, StepTarget{}).applied, every);
  const std::vector<std::string> plain = {"loss", "step state", "optimizer state", "sync"};
  EXPECT_EQ(build_step(declared("digits-cnn"), StepSpec{}, StepTarget{}).applied, plain);
  // Swapping to a budget the step fits already swaps nothing: not applied.
  StepSpec roomy;
  roomy.memory_plan = MemoryPlanKind::kReuse;
  roomy.swap.kind = SwapPolicy::Kind::kAuto;
  roomy.memory_budget = size_t{1} << 40;
  const StepProgram fits =
      build_step(declared("digits-cnn"), roomy, StepTarget{false, 64, size_t{1} << 40});
  EXPECT_TRUE(fits.swapped.empty());
  EXPECT_EQ(fits.applied, plain);
}

// Graph::bind takes a table that begins with the graph's own tensors, as declared: a table of
// another declaration (a tensor stored channels-last) or one that lacks a tensor is refused
// before anything is allocated.
TEST(BuildStep, TheGraphBindsOnlyATableThatBeginsWithItsOwn) {
  auto backend = make_backend(BackendKind::kCpu, {});
  Graph g = build_model("digits-cnn", ModelConfig{2, 8, 10, {}});
  g.declare_for(*backend);
  const StepProgram p = build_step(g, StepSpec{}, StepTarget{});
  Rng rng(0);
  std::vector<TensorInfo> other = p.tensors;
  other[g.output_id(1)].layout = Layout::kNHWC;
  EXPECT_THROW(g.bind(*backend, rng, naive_plan(p.schedule, other), other), InvalidArgument);
  const std::vector<TensorInfo> short_table(p.tensors.begin(), p.tensors.begin() + 3);
  EXPECT_THROW(g.bind(*backend, rng, naive_plan(Schedule{}, short_table), short_table),
               InvalidArgument);
  EXPECT_FALSE(g.is_setup());
  EXPECT_EQ(backend->allocator().allocations(), 0u);
  {
    const BoundStep bound = g.bind(*backend, rng, plan_step(p), p.tensors);
    EXPECT_TRUE(g.is_setup());
    EXPECT_EQ(bound.size(), p.tensors.size());
  }
  // The graph borrowed the bound step's table: gone with it, the graph is no longer set up.
  EXPECT_FALSE(g.is_setup());
  EXPECT_THROW(g.bound(), InvalidArgument);
}

TEST(BuildStep, IsPure) {
  const Graph g = declared("resnet18", Precision::kFp32, 32);
  StepSpec spec;
  spec.memory_plan = MemoryPlanKind::kReuse;
  spec.recompute = *parse_recompute("sqrt");
  spec.overlap = OverlapStrategy::kForward;
  spec.ranks = 2;
  const StepProgram a = build_step(g, spec, StepTarget{});
  const StepProgram b = build_step(g, spec, StepTarget{});
  EXPECT_EQ(described(a, g), described(b, g));
  EXPECT_EQ(names(a.tensors), names(b.tensors));
  EXPECT_EQ(a.buckets.bucket_of, b.buckets.bucket_of);
}

// Asynchronous SGD's host copies are tensors of the program: rank 0's step holds the server's
// (master weights and momentum, a reply per other rank), another rank's its own reply; each is
// host memory (host_comm), held across steps, outside the device's bytes, and the passes that
// move them name them.
TEST(BuildStep, AsyncDeclaresTheParameterServersHostCopiesInTheTable) {
  const Graph g = declared("digits-cnn");
  StepSpec spec;
  spec.memory_plan = MemoryPlanKind::kReuse;
  spec.sync = SyncMode{SyncMode::Kind::kAsync, 0};
  spec.ranks = 3;
  StepTarget rank1;
  rank1.rank = 1;
  const StepProgram server = build_step(g, spec, StepTarget{});
  const StepProgram worker = build_step(g, spec, rank1);
  const int64_t n = g.tensor_infos()[g.flat_gradient_id()].shape.numel();
  const AsyncTensors& s = server.ids.async;
  const AsyncTensors& w = worker.ids.async;
  EXPECT_EQ(s.reply, -1);
  ASSERT_EQ(s.replies.size(), 3u);
  EXPECT_EQ(s.replies[0], -1);
  EXPECT_EQ(w.master, -1);
  EXPECT_EQ(w.momentum, -1);
  EXPECT_TRUE(w.replies.empty());
  auto expect_host = [n](const StepProgram& p, int id, int64_t extra) {
    ASSERT_GE(id, 0);
    const TensorInfo& t = p.tensors.at(id);
    EXPECT_EQ(t.kind, TensorKind::kBuffer) << t.name;  // held across steps
    EXPECT_EQ(t.category, MemCategory::kHostComm) << t.name;
    EXPECT_EQ(t.shape, Shape{n + extra}) << t.name;
  };
  for (int id : {s.grads, s.momentum}) expect_host(server, id, 0);
  for (int id : {s.master, s.replies[1], s.replies[2]}) expect_host(server, id, 1);
  expect_host(worker, w.grads, 0);
  expect_host(worker, w.reply, 1);
  const MemoryPlan sp = plan_step(server), wp = plan_step(worker);
  EXPECT_EQ(sp.device_bytes(), wp.device_bytes());
  EXPECT_EQ(sp.bytes() - sp.device_bytes(), static_cast<size_t>(4 * (5 * n + 3)));
  EXPECT_EQ(wp.bytes() - wp.device_bytes(), static_cast<size_t>(4 * (2 * n + 1)));
  const std::vector<Step>& ws = worker.schedule.steps;
  ASSERT_EQ(sync_pass_of(ws.front()), SyncPass::kPull);
  EXPECT_EQ(ws.front().reads, std::vector<int>{w.reply});
  ASSERT_EQ(sync_pass_of(ws.back()), SyncPass::kPush);
  EXPECT_EQ(ws.back().writes, (std::vector<int>{w.grads, w.reply}));
  const Step& serve = server.schedule.steps.at(2);  // after the pull and the first forward pass
  ASSERT_EQ(sync_pass_of(serve), SyncPass::kProgress);
  EXPECT_EQ(serve.writes, (std::vector<int>{s.master, s.momentum, s.replies[1], s.replies[2]}));
  rank1.rank = 3;
  EXPECT_THROW(build_step(g, spec, rank1), std::logic_error);
}

TEST(BuildStep, RefusesWhatTheSpecRefusesAndAModelNotDeclared) {
  StepSpec async;
  async.sync = SyncMode{SyncMode::Kind::kAsync, 0};  // needs 2 ranks
  EXPECT_THROW(build_step(declared("digits-cnn"), async, StepTarget{}), InvalidArgument);
  const Graph bare = build_model("digits-cnn", ModelConfig{2, 8, 10, {}});
  EXPECT_THROW(build_step(bare, StepSpec{}, StepTarget{}), InvalidArgument);
}

// --print-step's text: the transforms, a line per pass and per tensor (each tensor's storage from
// the plan), and the plan's totals.
TEST(BuildStep, PrintsEveryPassAndTensorWithItsStorage) {
  const Graph g = declared("digits-cnn");
  StepSpec spec;
  spec.memory_plan = MemoryPlanKind::kReuse;
  const StepProgram p = build_step(g, spec, StepTarget{});
  const MemoryPlan plan = plan_step(p);
  const std::string text = program_text(p, g, plan);
  EXPECT_NE(text.find("transforms: loss, step state, optimizer state, sync\n"), std::string::npos);
  EXPECT_NE(text.find(fmt::format("passes ({})", p.schedule.steps.size())), std::string::npos);
  EXPECT_NE(text.find(fmt::format("plan: {} buffers", plan.buffers.size())), std::string::npos);
  for (size_t id = 0; id < p.tensors.size(); ++id) {
    EXPECT_NE(text.find(p.tensors[id].name), std::string::npos) << p.tensors[id].name;
  }
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  EXPECT_EQ(lines, 5 + p.schedule.steps.size() + p.tensors.size());
  EXPECT_EQ(plan.buffer_of, reuse_plan(p.schedule, p.tensors, p.kept).buffer_of);
}

// Evaluation is the step's forward passes alone, in its order, and the step's plan holds for it:
// no two tensors that the plan lets share bytes hold contents at once while it runs.
// The evaluation of `spec`'s step: its forward passes, in order, and no two tensors that the
// step's plan lets share bytes hold contents at once while it runs; what it reads before writing
// (parameters, buffers, the batch) the step holds whole too.
void expect_evaluation_under_the_steps_plan(const Graph& g, const StepSpec& spec) {
  const StepProgram step = build_step(g, spec, StepTarget{});
  const StepProgram eval = evaluation_program(step);
  std::vector<std::string> forward;
  for (const Step& s : step.schedule.steps) {
    if (s.pass == Pass::kForward) forward.push_back(describe_step(s, step.tensors, g.node_names()));
  }
  EXPECT_EQ(described(eval, g), forward);
  EXPECT_EQ(forward.size(), g.forward_schedule().steps.size());
  EXPECT_TRUE(check_schedule(eval.schedule, eval.tensors).empty());
  EXPECT_EQ(eval.applied.back(), "evaluation");

  const MemoryPlan plan = plan_step(step);
  const std::vector<Lifetime> live = lifetimes(eval.schedule, eval.tensors, eval.kept);
  const std::vector<Lifetime> step_live = lifetimes(step.schedule, step.tensors, step.kept);
  std::vector<int> written;  // stored tensors the evaluation writes and reads within itself
  for (size_t t = 0; t < eval.tensors.size(); ++t) {
    if (plan.buffer_of[t] < 0) continue;
    if (!live[t].whole) written.push_back(static_cast<int>(t));
    bool read = false;
    for (const Step& s : eval.schedule.steps)
      read = read || reads_storage(s, static_cast<int>(t), eval.tensors);
    if (read && live[t].whole) {
      EXPECT_TRUE(step_live[t].whole) << eval.tensors[t].name;
    }
  }
  ASSERT_GT(written.size(), 20u);
  int shared = 0;
  for (int a : written) {
    for (int b : written) {
      if (a >= b || plan.buffer_of[a] != plan.buffer_of[b]) continue;
      const size_t a0 = plan.offset_of[a], b0 = plan.offset_of[b];
      if (a0 >= b0 + eval.tensors[b].bytes() || b0 >= a0 + eval.tensors[a].bytes()) continue;
      ++shared;
      EXPECT_FALSE(live[a].meets(live[b]))
          << eval.tensors[a].name << " and " << eval.tensors[b].name;
    }
  }
  EXPECT_GT(shared, 0);  // the plan does reuse bytes among them
}

TEST(BuildStep, EvaluationIsTheStepsForwardPassesUnderTheStepsPlan) {
  StepSpec spec;
  spec.memory_plan = MemoryPlanKind::kReuse;
  spec.recompute = RecomputePolicy{RecomputePolicy::Kind::kSqrt, 0};
  spec.swap.kind = SwapPolicy::Kind::kAll;
  expect_evaluation_under_the_steps_plan(declared("resnet18", Precision::kFp32, 16), spec);
  // fp16 (loss scaling) with the forward strategy's carried updates before the forward passes.
  StepSpec forward;
  forward.memory_plan = MemoryPlanKind::kReuse;
  forward.precision = Precision::kFp16;
  forward.overlap = OverlapStrategy::kForward;
  forward.ranks = 2;
  expect_evaluation_under_the_steps_plan(declared("resnet18", Precision::kFp16, 16), forward);
}

// The Trainer builds its step with build_step: its schedule and table are the program's, and its
// graph keeps the model's tensors alone.
TEST(BuildStep, IsWhatTheTrainerRuns) {
  auto backend = make_backend(BackendKind::kCpu, {});
  Graph g = build_model("digits-cnn", ModelConfig{2, 8, 10, {}});
  g.declare_for(*backend);
  const size_t model = g.tensor_infos().size();
  TrainConfig tc;
  tc.step.memory_plan = MemoryPlanKind::kReuse;
  tc.step.swap.kind = SwapPolicy::Kind::kAll;
  Rng rng(0);
  Trainer t(*backend, g, tc, rng);
  EXPECT_EQ(g.tensor_infos().size(), model);
  const StepProgram p = build_step(g, t.program().spec, t.program().target);
  std::vector<std::string> run;
  for (const Step& s : t.schedule().steps)
    run.push_back(describe_step(s, t.tensors(), g.node_names()));
  EXPECT_EQ(run, described(p, g));
  EXPECT_EQ(names(t.tensors()), names(p.tensors));
  // Every tensor of the program is bound in the trainer's bound step.
  ASSERT_EQ(t.bound().size(), p.tensors.size());
  for (size_t id = 0; id < p.tensors.size(); ++id) {
    EXPECT_TRUE(t.bound().tensor(static_cast<int>(id)).defined()) << p.tensors[id].name;
  }
}

}  // namespace
}  // namespace dlb
