// The step as data: every reference model's schedule reads only what an earlier pass wrote (or a
// parameter, a buffer or the batch), the sync policies place all-reduces and updates where
// docs/architecture.md says, and with one rank the three strategies give the same step.
#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/comm/communicator.h"
#include "runtime/core/error.h"
#include "runtime/overlap/bucket_plan.h"
#include "runtime/overlap/sync_schedule.h"
#include "runtime/train/trainer.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

struct ModelCase {
  std::string model;
  int64_t image_size;
};
void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.model << " " << c.image_size; }

class ModelSchedule : public ::testing::TestWithParam<ModelCase> {};

std::vector<std::string> problems_of(const Schedule& s, const std::vector<TensorInfo>& tensors) {
  return check_schedule(s, tensors);
}

bool is(const Step& s, SyncPass p) { return s.pass == Pass::kSync && sync_pass_of(s) == p; }
bool is_update(const Step& s) {
  return is(s, SyncPass::kUpdate) || is(s, SyncPass::kUpdateCarried);
}

TEST_P(ModelSchedule, EveryReadWasWrittenEarlierOrIsGiven) {
  auto b = make_backend(BackendKind::kCpu, {});
  for (OverlapStrategy strategy :
       {OverlapStrategy::kNone, OverlapStrategy::kBackward, OverlapStrategy::kForward}) {
    Graph g = build_model(GetParam().model, ModelConfig{2, GetParam().image_size, 10, {}});
    Rng rng(0);
    g.declare_for(*b);
    TrainConfig tc;
    tc.step.overlap = strategy;
    Trainer t(*b, g, tc, rng);
    const Schedule& s = t.schedule();
    const std::vector<std::string> problems = problems_of(s, t.tensors());
    for (const std::string& p : problems) ADD_FAILURE() << overlap_name(strategy) << ": " << p;
    // Every parameter gradient is written by exactly one backward pass, and every parameter is
    // updated exactly once.
    const auto& infos = t.tensors();
    for (size_t id = 0; id < infos.size(); ++id) {
      const int t_id = static_cast<int>(id);
      auto writers = [&](auto&& which) {
        return std::count_if(s.steps.begin(), s.steps.end(), [&](const Step& st) {
          return which(st) &&
                 std::find(st.writes.begin(), st.writes.end(), t_id) != st.writes.end();
        });
      };
      if (infos[id].kind == TensorKind::kParamGrad) {
        EXPECT_EQ(writers([](const Step& st) {
                    return st.pass == Pass::kBackwardWeights || st.pass == Pass::kBackward;
                  }),
                  1)
            << infos[id].name;
      }
      if (infos[id].kind == TensorKind::kParam) {
        EXPECT_EQ(writers(is_update), 1) << infos[id].name;
      }
    }
  }
}

TEST_P(ModelSchedule, OneRankRunsTheSameStepForEveryStrategy) {
  auto b = make_backend(BackendKind::kCpu, {});
  std::vector<std::string> first;
  for (OverlapStrategy strategy :
       {OverlapStrategy::kNone, OverlapStrategy::kBackward, OverlapStrategy::kForward}) {
    Graph g = build_model(GetParam().model, ModelConfig{2, GetParam().image_size, 10, {}});
    Rng rng(0);
    g.declare_for(*b);
    TrainConfig tc;
    tc.step.overlap = strategy;
    tc.step.bucket_mb = 1;
    Trainer t(*b, g, tc, rng);
    std::vector<std::string> lines;
    for (const Step& s : t.schedule().steps)
      lines.push_back(describe_step(s, t.tensors(), g.node_names()));
    if (first.empty()) {
      first = lines;
      // No all-reduce with one rank, and every update after the last backward pass.
      EXPECT_EQ(std::count_if(t.schedule().steps.begin(), t.schedule().steps.end(),
                              [](const Step& s) { return is(s, SyncPass::kAllReduce); }),
                0);
    } else {
      EXPECT_EQ(lines, first) << overlap_name(strategy);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ReferenceModels, ModelSchedule,
                         ::testing::Values(ModelCase{"resnet18", 32}, ModelCase{"resnet50", 32},
                                           ModelCase{"alexnet", 63}, ModelCase{"vgg16", 32},
                                           ModelCase{"digits-cnn", 8}),
                         [](const auto& info) {
                           std::string n = info.param.model;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// Where the policies put the communication, on a graph declared as two ranks would have it.
class SyncSchedule : public ::testing::Test {
 protected:
  void SetUp() override {
    g = std::make_unique<Graph>(build_model("resnet18", ModelConfig{2, 32, 10, {}}));
    g->declare_for(*b);  // the schedule needs no storage
    std::vector<int64_t> numels;
    for (const ParamIds& p : g->flat_params())
      numels.push_back(g->tensor_infos()[p.value].shape.numel());
    plan = make_bucket_plan(numels, 4, 5.0);
    table = g->tensor_infos();
  }
  // forward, a loss that writes the output's gradient, backward.
  Schedule base() const {
    Schedule s = g->forward_schedule();
    Step loss;
    loss.pass = Pass::kLoss;
    loss.node = g->output();
    loss.reads = {g->output_id(g->output())};
    loss.writes = {g->grad_id(g->output())};
    s.steps.push_back(loss);
    const auto& bw = g->backward_schedule().steps;
    s.steps.insert(s.steps.end(), bw.begin(), bw.end());
    return s;
  }
  std::unique_ptr<Backend> b = make_backend(BackendKind::kCpu, {});
  std::unique_ptr<Graph> g;
  BucketPlan plan;
  std::vector<TensorInfo> table;  // the step's: the graph's, then what insert_sync declares
};

// Whether step `later` depends on step `earlier`, directly or through others.
bool ordered_after(const Schedule& s, size_t later, size_t earlier) {
  std::vector<char> seen(s.steps.size(), 0);
  std::vector<size_t> todo{later};
  while (!todo.empty()) {
    const size_t i = todo.back();
    todo.pop_back();
    for (int a : s.steps[i].after) {
      if (static_cast<size_t>(a) == earlier) return true;
      if (!seen[a]) seen[a] = 1, todo.push_back(static_cast<size_t>(a));
    }
  }
  return false;
}

TEST_F(SyncSchedule, NoneReducesTheWholeBufferOnceAfterBackward) {
  Schedule s = base();
  const size_t backward_end = s.steps.size();
  insert_sync(s, table, *g, plan, SyncOptions{OverlapStrategy::kNone, 2, false});
  ASSERT_EQ(s.steps.size(), backward_end + 2 + plan.buckets.size());
  EXPECT_TRUE(is(s.steps[backward_end], SyncPass::kAllReduce));
  EXPECT_EQ(s.steps[backward_end].arg, -1);
  EXPECT_EQ(s.steps[backward_end].lane, Lane::kComm);
  EXPECT_TRUE(is(s.steps[backward_end + 1], SyncPass::kWait));
  EXPECT_EQ(s.steps[backward_end + 1].arg, -1);
  for (size_t i = backward_end + 2; i < s.steps.size(); ++i) {
    EXPECT_TRUE(is(s.steps[i], SyncPass::kUpdate));
    EXPECT_TRUE(ordered_after(s, i, backward_end + 1)) << "an update runs after the wait";
  }
  for (const std::string& p : problems_of(s, table)) ADD_FAILURE() << p;
}

// Independent ranks meet after backward, reducing one token of their own, and update every
// bucket from their own gradients: no pass reads or writes a gradient but the updates.
TEST_F(SyncSchedule, IndependentRanksMeetAfterBackwardAndReduceNoGradient) {
  Schedule s = base();
  const size_t backward_end = s.steps.size();
  const size_t declared = table.size();
  SyncOptions o{OverlapStrategy::kNone, 2, false};
  o.independent = true;
  const SyncTensors t = insert_sync(s, table, *g, plan, o);
  ASSERT_EQ(table.size(), declared + 1);
  ASSERT_EQ(t.meeting, static_cast<int>(declared));
  EXPECT_EQ(table[declared].shape, Shape{1});
  EXPECT_EQ(table[declared].dtype, DType::kF32);
  ASSERT_EQ(s.steps.size(), backward_end + 2 + plan.buckets.size());
  for (size_t i : {backward_end, backward_end + 1}) {
    EXPECT_TRUE(is(s.steps[i], i == backward_end ? SyncPass::kAllReduce : SyncPass::kWait));
    EXPECT_EQ(s.steps[i].arg, kMeeting);
    EXPECT_EQ(s.steps[i].writes, std::vector<int>{t.meeting});  // no gradient is reduced
  }
  // The meeting waits for every gradient (it reads them), and the updates for the meeting.
  EXPECT_EQ(s.steps[backward_end + 1].reads, std::vector<int>{t.meeting});
  for (const ParamIds& p : g->flat_params()) {
    const std::vector<int>& reads = s.steps[backward_end].reads;
    EXPECT_NE(std::find(reads.begin(), reads.end(), p.grad), reads.end());
  }
  for (size_t i = 0; i < backward_end; ++i) {
    if (!s.steps[i].writes.empty() && s.steps[i].pass == Pass::kBackwardWeights) {
      EXPECT_TRUE(ordered_after(s, backward_end, i))
          << "the meeting after " << step_name(s.steps[i]);
    }
  }
  for (size_t i = backward_end + 2; i < s.steps.size(); ++i) {
    EXPECT_TRUE(is(s.steps[i], SyncPass::kUpdate));
    EXPECT_EQ(s.steps[i].arg, static_cast<int>(i - backward_end - 2));
    EXPECT_TRUE(ordered_after(s, i, backward_end + 1)) << "an update runs after the meeting";
  }
  EXPECT_TRUE(buckets_of(s, *g).buckets.size() == plan.buckets.size());
  for (const std::string& p : problems_of(s, table)) ADD_FAILURE() << p;

  // One rank has no one to meet: the step is sync's.
  Schedule one = base(), plain = base();
  std::vector<TensorInfo> one_table = g->tensor_infos(), plain_table = g->tensor_infos();
  o.ranks = 1;
  EXPECT_EQ(insert_sync(one, one_table, *g, plan, o).meeting, -1);
  insert_sync(plain, plain_table, *g, plan, SyncOptions{OverlapStrategy::kNone, 1, false});
  ASSERT_EQ(one.steps.size(), plain.steps.size());
  for (size_t i = 0; i < one.steps.size(); ++i) {
    EXPECT_STREQ(step_name(one.steps[i]), step_name(plain.steps[i]));
    EXPECT_EQ(one.steps[i].arg, plain.steps[i].arg);
  }
  EXPECT_EQ(one_table.size(), plain_table.size());
}

TEST_F(SyncSchedule, BackwardLaunchesEachBucketRightAfterItsLastGradient) {
  Schedule s = base();
  insert_sync(s, table, *g, plan, SyncOptions{OverlapStrategy::kBackward, 2, false});
  std::vector<int> order;
  bool launched = false;
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step& st = s.steps[i];
    // Once a reduction is in flight, every backward pass is followed by a progress pass.
    if (launched && st.pass == Pass::kBackwardData) {
      EXPECT_TRUE(is(s.steps[i + 1], SyncPass::kProgress)) << i;
    }
    if (!is(st, SyncPass::kAllReduce)) continue;
    launched = true;
    order.push_back(st.arg);
    // The pass before it (or a reduction launched with it) wrote one of its gradients.
    size_t j = i - 1;
    while (s.steps[j].pass == Pass::kSync) --j;
    const auto& w = s.steps[j].writes;
    EXPECT_TRUE(std::any_of(st.reads.begin(), st.reads.end(),
                            [&](int t) { return std::find(w.begin(), w.end(), t) != w.end(); }))
        << "bucket " << st.arg;
  }
  std::vector<int> expected(plan.buckets.size());
  for (size_t k = 0; k < expected.size(); ++k) expected[k] = static_cast<int>(k);
  EXPECT_EQ(order, expected);  // bucket order: the same on every rank
  EXPECT_GT(plan.buckets.size(), 2u);
  // After backward: each bucket's wait, then its update.
  const size_t tail = s.steps.size() - 2 * plan.buckets.size();
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const Step& wait = s.steps[tail + 2 * b];
    const Step& update = s.steps[tail + 2 * b + 1];
    EXPECT_TRUE(is(wait, SyncPass::kWait) && wait.arg == static_cast<int>(b)) << b;
    EXPECT_TRUE(is(update, SyncPass::kUpdate) && update.arg == static_cast<int>(b)) << b;
    EXPECT_TRUE(ordered_after(s, tail + 2 * b + 1, tail + 2 * b));
  }
  for (const std::string& p : problems_of(s, table)) ADD_FAILURE() << p;
}

TEST_F(SyncSchedule, UpdatesThatReadEveryGradientComeAfterEveryWait) {
  for (OverlapStrategy strategy : {OverlapStrategy::kBackward, OverlapStrategy::kForward}) {
    Schedule s = base();
    insert_sync(s, table, *g, plan, SyncOptions{strategy, 2, true});
    size_t waits = 0;
    for (const Step& st : s.steps) {
      if (is(st, SyncPass::kWait)) ++waits;
      if (is_update(st)) {
        EXPECT_EQ(waits, plan.buckets.size()) << overlap_name(strategy);
        break;
      }
    }
    for (const std::string& p : problems_of(s, table)) ADD_FAILURE() << p;
  }
}

TEST_F(SyncSchedule, ForwardWaitsAndUpdatesInReductionOrderBeforeTheFirstForwardThatNeedsThem) {
  Schedule s = base();
  insert_sync(s, table, *g, plan, SyncOptions{OverlapStrategy::kForward, 2, false});
  const auto& infos = table;
  // One group of [wait b][update b] for b = 0, 1, ... (the order the reductions finish in),
  // reading the carried gradients, right before the first forward pass that reads a parameter.
  size_t first = 0;
  while (!is(s.steps[first], SyncPass::kWait)) ++first;
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const Step& wait = s.steps[first + 2 * b];
    const Step& update = s.steps[first + 2 * b + 1];
    ASSERT_TRUE(is(wait, SyncPass::kWait) && wait.arg == static_cast<int>(b)) << b;
    ASSERT_TRUE(is(update, SyncPass::kUpdateCarried) && update.arg == static_cast<int>(b)) << b;
    for (int t : wait.reads) EXPECT_EQ(infos[t].kind, TensorKind::kCarried);
    EXPECT_TRUE(ordered_after(s, first + 2 * b + 1, first + 2 * b));
  }
  const Step& next = s.steps[first + 2 * plan.buckets.size()];
  ASSERT_EQ(next.pass, Pass::kForward);
  const auto reads_a_param = [&](const Step& f) {
    return std::any_of(f.reads.begin(), f.reads.end(),
                       [&](int t) { return infos[t].kind == TensorKind::kParam; });
  };
  EXPECT_TRUE(reads_a_param(next));
  for (size_t k = 0; k < first; ++k) EXPECT_FALSE(reads_a_param(s.steps[k])) << k;
  size_t updates = 0;
  for (const Step& st : s.steps) {
    EXPECT_FALSE(is(st, SyncPass::kUpdate)) << "every update reads carried gradients";
    updates += is(st, SyncPass::kUpdateCarried);
  }
  EXPECT_EQ(updates, plan.buckets.size());
  // The backward pass that overwrites a bucket's gradients runs after its carried update.
  for (size_t i = 0; i < s.steps.size(); ++i) {
    if (!is(s.steps[i], SyncPass::kUpdateCarried)) continue;
    for (size_t k = i + 1; k < s.steps.size(); ++k) {
      if (s.steps[k].pass != Pass::kBackwardWeights && s.steps[k].pass != Pass::kBackward) continue;
      bool overwrites = false;
      for (int r : s.steps[i].reads)
        for (int w : s.steps[k].writes) overwrites |= infos[r].alias_of == w;
      if (overwrites) {
        EXPECT_TRUE(ordered_after(s, k, i)) << k << " after " << i;
      }
    }
  }
  for (const std::string& p : problems_of(s, table)) ADD_FAILURE() << p;
}

TEST(ScheduleCheck, FindsAReadOfWhatNothingWroteBefore) {
  std::vector<TensorInfo> t = {{"x", TensorKind::kActivation, Shape{1}},
                               {"w", TensorKind::kParam, Shape{1}},
                               {"y", TensorKind::kActivation, Shape{1}},
                               {"y (carried)", TensorKind::kCarried, Shape{1}, DType::kF32, -1, 2}};
  Schedule s;
  Step reads_y;
  reads_y.pass = Pass::kForward;
  reads_y.reads = {2, 1};
  reads_y.writes = {0};
  Step writes_y;
  writes_y.pass = Pass::kForward;
  writes_y.writes = {2};
  s.steps = {reads_y, writes_y};
  link_dependencies(s, t);
  ASSERT_EQ(check_schedule(s, t).size(), 1u);
  EXPECT_NE(check_schedule(s, t)[0].find("reads y"), std::string::npos);
  std::swap(s.steps[0], s.steps[1]);
  link_dependencies(s, t);
  EXPECT_TRUE(check_schedule(s, t).empty());
  EXPECT_EQ(s.steps[1].after, std::vector<int>{0});
  // A read of a previous step's value (a carried view) is fine anywhere, as long as something
  // writes it.
  std::swap(s.steps[0], s.steps[1]);
  s.steps[0].reads = {3, 1};
  link_dependencies(s, t);
  EXPECT_TRUE(check_schedule(s, t).empty());
  s.steps.pop_back();  // nothing writes y now
  link_dependencies(s, t);
  EXPECT_EQ(check_schedule(s, t).size(), 1u);
}

bool same_buckets(const BucketPlan& a, const BucketPlan& b) {
  if (a.buckets.size() != b.buckets.size() || a.bucket_of != b.bucket_of) return false;
  for (size_t k = 0; k < a.buckets.size(); ++k) {
    const Bucket &x = a.buckets[k], &y = b.buckets[k];
    if (x.first_param != y.first_param || x.num_params != y.num_params || x.begin != y.begin ||
        x.count != y.count || x.values != y.values) {
      return false;
    }
  }
  return true;
}

// What GradSync reduces and updates is what the program's sync passes name: from their tensors
// alone, the program's own bucket plan, for every strategy on 1 and 2 ranks, with buckets that
// end before an alignment gap (tiny ones) and with a guard zone after every gradient
// (--memory-guard); none for staleness and async, whose passes name no bucket.
TEST(BucketsOf, TheSyncPassesTensorsGiveBackTheProgramsBuckets) {
  for (const char* model : {"digits-cnn", "resnet18", "resnet50"}) {
    for (bool guarded : {false, true}) {
      Graph g = build_model(model, ModelConfig{2, model[0] == 'd' ? 8 : 32, 10, {}});
      BackendTraits traits;
      traits.guarded = guarded;
      g.declare(PrecisionPolicy{}, traits);
      for (OverlapStrategy strategy :
           {OverlapStrategy::kNone, OverlapStrategy::kBackward, OverlapStrategy::kForward}) {
        for (int64_t ranks : {1, 2}) {
          for (double mb : {0.001, 0.5}) {
            StepSpec spec;
            spec.overlap = strategy;
            spec.bucket_mb = mb;
            spec.ranks = ranks;
            const StepProgram p = build_step(g, spec, StepTarget{});
            ASSERT_GT(p.buckets.buckets.size(), 1u) << model;
            EXPECT_TRUE(same_buckets(buckets_of(p.schedule, g), p.buckets))
                << model << " " << overlap_name(strategy) << " " << ranks << " " << mb << " MB"
                << (guarded ? " guarded" : "");
          }
        }
      }
      StepSpec stale, async;
      stale.sync = SyncMode{SyncMode::Kind::kStale, 2};
      async.sync = SyncMode{SyncMode::Kind::kAsync, 0};
      stale.ranks = async.ranks = 2;
      EXPECT_TRUE(buckets_of(build_step(g, stale, StepTarget{}).schedule, g).buckets.empty());
      EXPECT_TRUE(buckets_of(build_step(g, async, StepTarget{}).schedule, g).buckets.empty());
    }
  }
}

// InvalidArgument whose message contains `words`.
template <typename F>
void expect_refused(F&& f, const std::string& words) {
  try {
    f();
    ADD_FAILURE() << "not refused: " << words;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(BucketsOf, RefusesPassesThatNameNoParameterOrAGap) {
  Graph g = build_model("digits-cnn", ModelConfig{2, 8, 10, {}});
  g.declare(PrecisionPolicy{}, BackendTraits{});
  StepSpec spec;
  spec.overlap = OverlapStrategy::kBackward;
  spec.bucket_mb = 0.001;  // a bucket per parameter or so
  spec.ranks = 2;
  const StepProgram p = build_step(g, spec, StepTarget{});
  auto first_update = [](Schedule& s) -> Step& {
    return *std::find_if(s.steps.begin(), s.steps.end(), is_update);
  };
  Schedule not_a_param = p.schedule;
  first_update(not_a_param).writes = {g.output_id(g.output())};
  expect_refused([&] { buckets_of(not_a_param, g); }, "no parameter's");
  const std::vector<ParamIds>& params = g.flat_params();
  Schedule gap = p.schedule;
  first_update(gap).writes = {params[0].value, params[2].value};
  expect_refused([&] { buckets_of(gap, g); }, "not contiguous");
  Schedule differ = p.schedule;  // bucket 0's update names bucket 1's parameters
  Step& update = first_update(differ);
  update.writes.clear();
  const Bucket& other = p.buckets.buckets.at(update.arg == 0 ? 1 : 0);
  for (size_t i = other.first_param; i < other.first_param + other.num_params; ++i) {
    update.writes.push_back(params[i].value);
  }
  expect_refused([&] { buckets_of(differ, g); }, "name different parameters");
}

TEST(BucketPlan, FirstBucketSmallThenBucketMb) {
  // 0.5 MiB, 0.75 MiB, 3 MiB, 1 MiB, 1 MiB of f32 parameters, buckets of 2 MiB.
  const int64_t mib = 1024 * 1024 / 4;
  const BucketPlan p = make_bucket_plan({mib / 2, 3 * mib / 4, 3 * mib, mib, mib}, 4, 2.0);
  ASSERT_EQ(p.buckets.size(), 3u);
  EXPECT_EQ(p.buckets[0].first_param, 0u);  // closes at >= 1 MiB: 1.25 MiB
  EXPECT_EQ(p.buckets[0].num_params, 2u);
  EXPECT_EQ(p.buckets[1].num_params, 1u);  // 3 MiB alone passes 2 MiB
  EXPECT_EQ(p.buckets[2].first_param, 3u);
  EXPECT_EQ(p.buckets[2].begin, mib / 2 + 3 * mib / 4 + 3 * mib);
  EXPECT_EQ(p.buckets[2].count, 2 * mib);
  EXPECT_EQ(p.bucket_of, (std::vector<size_t>{0, 0, 1, 2, 2}));
}

TEST(PrecisionPolicy, HalfPrecisionsKeepMasterWeightsStateAndStatisticsInF32) {
  const PrecisionPolicy bf16 = PrecisionPolicy::for_precision(Precision::kBf16);
  EXPECT_EQ(bf16.dtype(TensorRole::kActivations), DType::kBF16);
  EXPECT_EQ(bf16.dtype(TensorRole::kGradients), DType::kBF16);
  EXPECT_EQ(bf16.dtype(TensorRole::kMasterWeights), DType::kF32);
  EXPECT_EQ(bf16.dtype(TensorRole::kOptimizerState), DType::kF32);
  EXPECT_EQ(bf16.dtype(TensorRole::kStatistics), DType::kF32);
  const PrecisionPolicy tf32 = PrecisionPolicy::for_precision(Precision::kTf32);
  EXPECT_EQ(tf32.activations, DType::kF32);
  EXPECT_EQ(tf32.math, Precision::kTf32);
}

TEST(GraphViews, FlattenAliasesItsInputAndRunsNoPass) {
  auto b = make_backend(BackendKind::kCpu, {});
  Graph g = build_model("resnet18", ModelConfig{2, 32, 10, {}});
  Rng rng(0);
  g.setup(*b, rng);
  int flatten = -1;
  for (size_t i = 0; i < g.nodes().size(); ++i)
    if (g.nodes()[i].name == "flatten") flatten = static_cast<int>(i);
  ASSERT_GE(flatten, 0);
  const int pool = g.nodes()[flatten].inputs[0];
  const BoundStep& bound = g.bound();
  EXPECT_EQ(bound.tensor(g.output_id(flatten)).raw(), bound.tensor(g.output_id(pool)).raw());
  EXPECT_EQ(bound.tensor(g.grad_id(flatten)).raw(), bound.tensor(g.grad_id(pool)).raw());
  for (const Schedule* s : {&g.forward_schedule(), &g.backward_schedule()})
    for (const Step& st : s->steps) EXPECT_NE(st.node, flatten);
}

}  // namespace
}  // namespace dlb
