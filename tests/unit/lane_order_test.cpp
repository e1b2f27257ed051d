// The step's lanes honour its edges (runtime/nn/lane_order.h): every program build_step makes is
// ordered by its lanes' rules alone, its carried edges reach the iteration that wrote what it
// reads, and a program with a wait taken out is refused, naming the pass that would race.
#include "runtime/nn/lane_order.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/overlap/sync_schedule.h"
#include "runtime/train/step_program.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

Graph declared(const char* model, Precision precision, int64_t size,
               const BackendTraits& traits = {}) {
  Graph g = build_model(model, ModelConfig{2, size, 10, {}});
  g.declare(PrecisionPolicy::for_precision(precision), traits);
  return g;
}

// The declarations of the three kinds: no fusion; the CPU backend's (convolution and batch norm
// fused with their ReLUs); the CUDA backend's (pooling's argmax, batch norm fused with its ReLU,
// 16-bit activations channels-last).
enum class Declared { kPlain, kCpu, kCuda };

BackendTraits traits_of(Declared kind, Precision precision) {
  BackendTraits t;
  t.fuses_batch_norm_relu = kind != Declared::kPlain;
  t.fuses_conv_relu = kind == Declared::kCpu;
  t.saves_pool_argmax = kind == Declared::kCuda;
  if (kind == Declared::kCuda && precision != Precision::kFp32) {
    t.activation_layout = Layout::kNHWC;
  }
  return t;
}

StepSpec spec_of(OverlapStrategy overlap, int64_t ranks, SyncMode sync = {}) {
  StepSpec spec;
  spec.memory_plan = MemoryPlanKind::kReuse;
  spec.overlap = overlap;
  spec.ranks = ranks;
  spec.sync = sync;
  spec.bucket_mb = 0.01;  // several buckets, even for the digits
  return spec;
}

// The index of the first pass `match` accepts (-1: none).
template <typename Match>
int find_pass(const Schedule& s, Match match) {
  for (size_t i = 0; i < s.steps.size(); ++i)
    if (match(s.steps[i])) return static_cast<int>(i);
  return -1;
}

bool is_sync(const Step& step, SyncPass kind) {
  return step.pass == Pass::kSync && sync_pass_of(step) == kind;
}

bool mentions(const std::vector<std::string>& problems, const std::string& a,
              const std::string& b) {
  return std::any_of(problems.begin(), problems.end(), [&](const std::string& p) {
    return p.find(a) != std::string::npos && p.find(b) != std::string::npos;
  });
}

// Every strategy and technique that adds passes or lanes, and each memory plan.
std::vector<StepSpec> every_kind_of_step() {
  std::vector<StepSpec> specs;
  for (OverlapStrategy o : kOverlapStrategies)
    for (int64_t ranks : {1, 2}) specs.push_back(spec_of(o, ranks));
  for (int64_t k : {1, 2, 3})
    for (int64_t ranks : {1, 2})
      specs.push_back(spec_of(OverlapStrategy::kNone, ranks, {SyncMode::Kind::kStale, k}));
  specs.push_back(spec_of(OverlapStrategy::kNone, 3, {SyncMode::Kind::kAsync, 0}));
  specs.push_back(spec_of(OverlapStrategy::kNone, 2, {SyncMode::Kind::kIndependent, 0}));
  StepSpec swapped = spec_of(OverlapStrategy::kForward, 2);
  swapped.swap.kind = SwapPolicy::Kind::kAll;
  specs.push_back(swapped);
  StepSpec budget = spec_of(OverlapStrategy::kBackward, 2);  // swaps until the step fits
  budget.swap.kind = SwapPolicy::Kind::kAuto;
  budget.memory_budget = size_t{1};
  specs.push_back(budget);
  StepSpec recomputed = spec_of(OverlapStrategy::kBackward, 2);
  recomputed.recompute = RecomputePolicy{RecomputePolicy::Kind::kSqrt, 0};
  specs.push_back(recomputed);
  StepSpec segments = spec_of(OverlapStrategy::kForward, 2);
  segments.recompute = RecomputePolicy{RecomputePolicy::Kind::kEvery, 2};
  segments.memory_plan = MemoryPlanKind::kReorder;
  specs.push_back(segments);
  StepSpec naive = spec_of(OverlapStrategy::kForward, 2);
  naive.memory_plan = MemoryPlanKind::kNaive;
  specs.push_back(naive);
  return specs;
}

// The program, its plan and its evaluation program, checked; how many edges join two lanes.
int checked(const Graph& g, const StepSpec& spec, const StepTarget& target,
            const std::string& what) {
  const StepProgram p = build_step(g, spec, target);  // which checks, and throws
  EXPECT_EQ(lane_order_problems(p.schedule, p.tensors), std::vector<std::string>{}) << what;
  const MemoryPlan plan = plan_step(p);  // which checks the bytes, and throws
  EXPECT_EQ(plan_lane_problems(p.schedule, p.tensors, plan), std::vector<std::string>{}) << what;
  const StepProgram eval = evaluation_program(p);
  EXPECT_TRUE(lane_order_problems(eval.schedule, eval.tensors).empty()) << what;
  EXPECT_TRUE(plan_lane_problems(eval.schedule, eval.tensors, plan).empty()) << what;
  int cross_lane = 0;
  for (const Step& s : p.schedule.steps)
    for (int a : s.after) cross_lane += p.schedule.steps[a].lane != s.lane;
  return cross_lane;
}

TEST(LaneOrder, EveryProgramIsOrderedByItsLanesAlone) {
  int programs = 0, cross_lane = 0;
  for (const char* model : {"digits-cnn", "resnet18"}) {
    for (Precision precision : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
      for (const Declared kind : {Declared::kPlain, Declared::kCpu, Declared::kCuda}) {
        const bool cuda = kind == Declared::kCuda;
        const Graph g =
            declared(model, precision, model[0] == 'd' ? 8 : 32, traits_of(kind, precision));
        for (StepSpec spec : every_kind_of_step()) {
          spec.precision = precision;
          // fp16's loss scaling reads this step's gradients: not with stale:K or async.
          if (precision == Precision::kFp16 && (spec.staleness() > 0 || spec.async())) continue;
          if (spec.async() && precision != Precision::kFp32) continue;  // fp32 only
          for (int64_t rank = 0; rank < (spec.async() ? spec.ranks : 1); ++rank) {
            StepTarget target;
            target.rank = rank;
            target.second_input = cuda;  // the CUDA backend's asynchronous input copies
            const std::string what = fmt::format(
                "{} {} declared {} {} {} swap {} rank {}", model, precision_name(precision),
                static_cast<int>(kind), sync_mode_name(spec.sync), overlap_name(spec.overlap),
                swap_name(spec.swap), rank);
            cross_lane += checked(g, spec, target, what);
            ++programs;
          }
        }
      }
    }
  }
  // Per model and declaration: fp32 21 kinds (async on 3 ranks), bf16 18, fp16 12.
  EXPECT_EQ(programs, 2 * 3 * (21 + 18 + 12));
  EXPECT_GT(cross_lane, 1000);  // the check had edges between lanes to prove
}

TEST(LaneOrder, CarriedEdgesReachTheIterationThatWroteWhatAPassReads) {
  const Graph g = declared("digits-cnn", Precision::kFp32, 8);
  for (int64_t k : {1, 2, 3}) {
    const Schedule s =
        build_step(g, spec_of(OverlapStrategy::kNone, 2, {SyncMode::Kind::kStale, k}), {}).schedule;
    const int wait = find_pass(s, [](const Step& x) { return is_sync(x, SyncPass::kWait); });
    const int reduce = find_pass(s, [](const Step& x) { return is_sync(x, SyncPass::kAllReduce); });
    ASSERT_GE(wait, 0);
    ASSERT_GT(reduce, wait);
    // The slot a step waits for was reduced K steps back.
    EXPECT_EQ(s.steps[wait].carried, (std::vector<CarriedEdge>{{reduce, static_cast<int>(k)}}));
    EXPECT_EQ(s.steps[wait].join, Join::kLanes);
  }
  const Schedule fwd = build_step(g, spec_of(OverlapStrategy::kForward, 2), {}).schedule;
  int carried_waits = 0;
  for (const Step& step : fwd.steps) {
    if (!is_sync(step, SyncPass::kWait)) continue;
    // Each bucket's wait, at the top of the step, for its reduction in the step before.
    const int reduce = find_pass(
        fwd, [&](const Step& x) { return is_sync(x, SyncPass::kAllReduce) && x.arg == step.arg; });
    EXPECT_EQ(step.carried, (std::vector<CarriedEdge>{{reduce, 1}})) << "bucket " << step.arg;
    ++carried_waits;
  }
  EXPECT_GT(carried_waits, 1);
  // After `backward`, the first forward pass reads weights the step before's updates wrote.
  const Schedule bwd = build_step(g, spec_of(OverlapStrategy::kBackward, 2), {}).schedule;
  const int first = find_pass(bwd, [](const Step& x) { return x.pass == Pass::kForward; });
  const std::vector<CarriedEdge>& edges = bwd.steps[first].carried;
  EXPECT_TRUE(std::any_of(edges.begin(), edges.end(), [&](const CarriedEdge& e) {
    return e.distance == 1 && is_sync(bwd.steps[e.pass], SyncPass::kUpdate);
  }));
}

// The slot a stale step's passes touch, as the lane check reads it (TensorInfo::turn), is the
// one its runners use (stale_slot).
TEST(LaneOrder, TheSlotOfATurnIsTheSlotTheRunnersUse) {
  const Graph g = declared("digits-cnn", Precision::kFp32, 8);
  for (int64_t k : {1, 2, 3, 4}) {
    const StepProgram p =
        build_step(g, spec_of(OverlapStrategy::kNone, 2, {SyncMode::Kind::kStale, k}), {});
    ASSERT_EQ(p.ids.stale_slots.size(), static_cast<size_t>(k));
    for (int64_t t = 0; t < 3 * k; ++t) {
      const TensorInfo& used = p.tensors[p.ids.stale_slots[stale_slot(t, k)]];
      EXPECT_EQ(used.turns, k);
      EXPECT_EQ(used.turn, t % used.turns);
    }
  }
}

// A program with one of its joins taken out: the lanes race, and the check says where.
std::vector<std::string> without_join(const StepProgram& p, int pass) {
  Schedule s = p.schedule;
  s.steps.at(pass).join = Join::kNone;
  return lane_order_problems(s, p.tensors);
}

// The program with pass `pass` taken out, its edges linked again.
std::vector<std::string> without_pass(const StepProgram& p, int pass) {
  Schedule s = p.schedule;
  s.steps.erase(s.steps.begin() + pass);
  link_dependencies(s, p.tensors);
  return lane_order_problems(s, p.tensors);
}

TEST(LaneOrder, AReductionsWaitTakenOutIsRefused) {
  const Graph g = declared("digits-cnn", Precision::kFp32, 8);
  const StepProgram p = build_step(g, spec_of(OverlapStrategy::kBackward, 2), {});
  const Schedule& bwd = p.schedule;
  const int wait = find_pass(bwd, [](const Step& x) { return is_sync(x, SyncPass::kWait); });
  // A wait that waits for nothing: it reads the bucket while the reduction writes it.
  EXPECT_TRUE(mentions(without_join(p, wait), "(wait 0 on compute) starts before",
                       "(allreduce 0 on comm)"));
  // No wait: the bucket's update reads it.
  EXPECT_TRUE(mentions(without_pass(p, wait), "(optimizer 0 on compute) starts before",
                       "(allreduce 0 on comm)"));
  // The carried wait of `forward`: the update reads the reduction of the step before.
  const StepProgram fwd = build_step(g, spec_of(OverlapStrategy::kForward, 2), {});
  const int carried =
      find_pass(fwd.schedule, [](const Step& x) { return is_sync(x, SyncPass::kWait); });
  EXPECT_TRUE(mentions(without_join(fwd, carried), "(allreduce", "of the iteration 1 back"));
  // A stale slot's wait: the slot's reduction two steps back.
  const StepProgram stale =
      build_step(g, spec_of(OverlapStrategy::kNone, 2, {SyncMode::Kind::kStale, 2}), {});
  const int slot =
      find_pass(stale.schedule, [](const Step& x) { return is_sync(x, SyncPass::kWait); });
  const std::vector<std::string> unwaited = without_join(stale, slot);
  EXPECT_TRUE(mentions(unwaited, "(allreduce", "of the iteration 2 back"));
  // ...and the slot's next reduction is launched while it is still being reduced.
  EXPECT_TRUE(mentions(unwaited, "(allreduce on comm) is launched again", "has ended"));
}

TEST(LaneOrder, ASwapsWaitTakenOutIsRefused) {
  const Graph g = declared("digits-cnn", Precision::kFp32, 8);
  StepSpec spec = spec_of(OverlapStrategy::kNone, 1);
  spec.swap.kind = SwapPolicy::Kind::kAll;
  const StepProgram p = build_step(g, spec, {});
  const int wait = find_pass(p.schedule, [](const Step& x) { return x.pass == Pass::kSwapWait; });
  ASSERT_GE(wait, 0);
  EXPECT_TRUE(mentions(without_join(p, wait), "(swap_out on copy)", "on compute) starts before"));
}

// A plan that gives the bytes a copy out reads to a tensor compute writes before the copy's wait:
// in list order the copy is that activation's last use, and only the lanes say it may still run.
TEST(LaneOrder, APlanThatReusesBytesACopyStillReadsIsRefused) {
  const Graph g = declared("digits-cnn", Precision::kFp32, 8);
  StepSpec spec = spec_of(OverlapStrategy::kNone, 1);
  spec.swap.kind = SwapPolicy::Kind::kAll;
  const StepProgram p = build_step(g, spec, {});
  MemoryPlan plan = plan_step(p);
  const Schedule& s = p.schedule;
  // A copy out, and the first tensor of its own (no view) that a compute pass writes after the
  // copy and before its wait.
  int swapped = -1, overwriting = -1;
  for (size_t out = 0; out < s.steps.size() && overwriting < 0; ++out) {
    if (s.steps[out].pass != Pass::kSwapOut) continue;
    swapped = storage_of(s.steps[out].y, p.tensors);
    for (size_t i = out + 1; i < s.steps.size() && overwriting < 0; ++i) {
      const Step& x = s.steps[i];
      if (x.pass == Pass::kSwapWait && x.y == s.steps[out].y) break;
      if (x.lane != Lane::kCompute) continue;
      for (int w : x.writes) {
        const TensorInfo& t = p.tensors[w];
        if (t.alias_of < 0 && t.bytes() <= p.tensors[swapped].bytes()) overwriting = w;
      }
    }
  }
  ASSERT_GE(overwriting, 0);
  plan.buffer_of[overwriting] = plan.buffer_of[swapped];
  plan.offset_of[overwriting] = plan.offset_of[swapped];
  const std::vector<std::string> problems = plan_lane_problems(s, p.tensors, plan);
  EXPECT_TRUE(mentions(problems, "writes " + p.tensors[overwriting].name + " in bytes that",
                       "(swap_out on copy) read as " + p.tensors[swapped].name))
      << ::testing::PrintToString(problems);
}

TEST(LaneOrder, APullTheHostDoesNotWaitForIsRefused) {
  const Graph g = declared("digits-cnn", Precision::kFp32, 8);
  StepTarget server;
  server.rank = 0;  // whose progress passes, on the host, serve from the master weights
  const StepProgram p =
      build_step(g, spec_of(OverlapStrategy::kNone, 2, {SyncMode::Kind::kAsync, 0}), server);
  const Schedule& s = p.schedule;
  const int pull = find_pass(s, [](const Step& x) { return is_sync(x, SyncPass::kPull); });
  const int push = find_pass(s, [](const Step& x) { return is_sync(x, SyncPass::kPush); });
  ASSERT_GE(pull, 0);
  EXPECT_EQ(s.steps[pull].join, Join::kHostMemory);
  EXPECT_EQ(s.steps[push].join, Join::kHost);
  // The pull reads the master weights the first progress pass then serves into.
  EXPECT_TRUE(mentions(without_join(p, pull), "(progress on host) starts before", "(pull on"));
}

// The rules one at a time, on schedules of two tensors.
Step pass_on(Lane lane, std::vector<int> reads, std::vector<int> writes, Join join = Join::kNone) {
  Step s;
  s.pass = Pass::kForward;
  s.lane = lane;
  s.reads = std::move(reads);
  s.writes = std::move(writes);
  s.join = join;
  return s;
}

// Tensor 0 in host memory where `host_memory` says so; tensor 1 always the device's.
std::vector<std::string> problems_of(std::vector<Step> steps, bool host_memory = false) {
  std::vector<TensorInfo> tensors(2);
  tensors[0].kind = tensors[1].kind = TensorKind::kBuffer;
  if (host_memory) tensors[0].category = MemCategory::kHostComm;
  Schedule s{std::move(steps)};
  link_dependencies(s, tensors);
  return lane_order_problems(s, tensors);
}

TEST(LaneOrder, EachRuleOrdersWhatItSaysAndNoMore) {
  const Lane c = Lane::kCompute, comm = Lane::kComm, copy = Lane::kCopy, host = Lane::kHost;
  const Join wait = Join::kLanes;
  // A launch on comm or copy follows the compute work issued before it; a wait on compute
  // follows it, and what compute runs next, and the next iteration's launches, follow the wait.
  EXPECT_TRUE(
      problems_of({pass_on(c, {}, {0}), pass_on(comm, {0}, {1}), pass_on(c, {1}, {1}, wait)})
          .empty());
  EXPECT_TRUE(
      problems_of({pass_on(c, {}, {0}), pass_on(copy, {0}, {1}), pass_on(c, {1}, {1}, wait)})
          .empty());
  // Compute after comm without a wait; and so comm's next launch before its last has ended.
  EXPECT_EQ(problems_of({pass_on(comm, {}, {0}), pass_on(c, {0}, {1})}),
            (std::vector<std::string>{
                "pass 1 (forward on compute) starts before pass 0 (forward on comm) has ended",
                "pass 0 (forward on comm) is launched again before its last launch has ended"}));
  // Comm does not order its own passes: a reduction after a reduction needs a wait between.
  EXPECT_EQ(problems_of({pass_on(comm, {}, {0}), pass_on(comm, {0}, {1}),
                         pass_on(c, {0, 1}, {0, 1}, wait)}),
            std::vector<std::string>{
                "pass 1 (forward on comm) starts before pass 0 (forward on comm) has ended"});
  EXPECT_TRUE(
      problems_of({pass_on(comm, {}, {0}), pass_on(c, {0}, {0}, wait), pass_on(c, {0}, {1})})
          .empty());
  // A wait on compute orders compute, not the host.
  EXPECT_EQ(
      problems_of({pass_on(comm, {}, {0}), pass_on(c, {0}, {}, wait), pass_on(host, {0}, {})}),
      std::vector<std::string>{
          "pass 2 (forward on host) starts before pass 0 (forward on comm) has ended"});
  // The host does not wait for compute unless the pass says so.
  EXPECT_EQ(problems_of({pass_on(c, {}, {0}), pass_on(host, {0}, {})}).size(), 1u);
  EXPECT_TRUE(problems_of({pass_on(c, {}, {0}, Join::kHost), pass_on(host, {0}, {})}).empty());
  // Compute follows what the host ran; the host's next write does not follow compute's read.
  EXPECT_EQ(problems_of({pass_on(host, {}, {0}), pass_on(c, {0}, {})}),
            std::vector<std::string>{"pass 0 (forward on host) starts before pass 1 (forward on "
                                     "compute) of the iteration 1 back has ended"});
  // Across iterations: compute overwrites what comm read in the last one, with no wait.
  EXPECT_EQ(problems_of({pass_on(c, {}, {0}), pass_on(comm, {0}, {})}),
            (std::vector<std::string>{
                "pass 0 (forward on compute) starts before pass 1 (forward on comm) of the "
                "iteration 1 back has ended",
                "pass 1 (forward on comm) is launched again before its last launch has ended"}));
  // A pass that has done with host memory when it returns (a pull) orders the host's next
  // touches of host memory (tensor 0), not of what it writes on the device (tensor 1).
  const Join host_memory = Join::kHostMemory;
  EXPECT_TRUE(
      problems_of({pass_on(c, {0}, {1}, host_memory), pass_on(host, {}, {0})}, true).empty());
  EXPECT_EQ(problems_of({pass_on(c, {0}, {1}), pass_on(host, {}, {0})}, true).size(), 1u);
  EXPECT_EQ(problems_of({pass_on(c, {0}, {1}, host_memory), pass_on(host, {1}, {})}, true),
            std::vector<std::string>{
                "pass 1 (forward on host) starts before pass 0 (forward on compute) has ended"});
}

}  // namespace
}  // namespace dlb
