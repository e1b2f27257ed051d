// Declare, plan, bind: a graph's tensors and schedule come from declarations alone, with no
// backend and nothing allocated, and the naive plan of that table is what a real setup allocates,
// byte for byte, category by category (all but the backend's workspace, which is not in the
// table yet: Graph::bind).
#include "runtime/nn/memory_plan.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include "runtime/backend/backend.h"
#include "runtime/backend/delegating_backend.h"
#include "runtime/core/error.h"
#include "runtime/core/hash.h"
#include "runtime/nn/reorder.h"
#include "runtime/nn/swap.h"
#include "runtime/overlap/sync_schedule.h"
#include "runtime/train/trainer.h"
#include "workloads/data/dataset.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

TEST(MemoryPlan, Resnet50AtBatch256IsDeclaredAndPlannedWithoutABackend) {
  Graph g = build_model("resnet50", ModelConfig{256, 224, 1000, {}});
  g.declare(PrecisionPolicy{}, BackendTraits{});
  const MemoryPlan plan = naive_plan(g.step_schedule(), g.tensor_infos());
  const PlanPeaks peaks = plan_peaks(plan);
  for (MemCategory c : {MemCategory::kWeights, MemCategory::kGradients, MemCategory::kActivations,
                        MemCategory::kData}) {
    std::printf("resnet50, batch 256, 224x224, fp32, naive plan: %-12s %s\n",
                std::string(mem_category_name(c)).c_str(),
                format_bytes(peaks.by_category[static_cast<size_t>(c)]).c_str());
  }
  std::printf("resnet50, batch 256, 224x224, fp32, naive plan: total        %s\n",
              format_bytes(peaks.total).c_str());
  // Nothing is bound: the graph has no bound step.
  EXPECT_FALSE(g.is_setup());
  EXPECT_THROW(g.bound(), InvalidArgument);
  // What the table must hold, counted another way: every parameter and batch-norm buffer in f32
  // (running mean and variance per channel, and an int64 batch count), every gradient once (with
  // at most 252 bytes of alignment before each), and the batch.
  int64_t bn_channels = 0, bn_layers = 0;
  for (const Graph::Node& n : g.nodes()) {
    if (n.layer && n.layer->kind() == "batch_norm") bn_channels += n.shape[1], ++bn_layers;
  }
  const auto bytes = [&](MemCategory c) { return peaks.by_category[static_cast<size_t>(c)]; };
  const size_t params = static_cast<size_t>(g.num_params()) * 4;
  EXPECT_EQ(g.num_params(), 25557032);
  EXPECT_EQ(bytes(MemCategory::kWeights),
            params + static_cast<size_t>(bn_channels * 8 + bn_layers * 8));
  EXPECT_GE(bytes(MemCategory::kGradients), params);
  EXPECT_LE(bytes(MemCategory::kGradients), params + g.flat_params().size() * 252);
  EXPECT_EQ(bytes(MemCategory::kData), size_t{256} * 3 * 224 * 224 * 4);
  EXPECT_EQ(bytes(MemCategory::kOptimizerState), 0u);  // the graph alone: no optimizer
  // Naive: every buffer is held over the whole step, so the peak is the sum.
  size_t sum = 0;
  for (const PlannedBuffer& b : plan.buffers) sum += b.bytes;
  EXPECT_EQ(peaks.total, sum);
}

// The peak is a sweep over the buffers' step ranges: each category's own, and the total's.
TEST(MemoryPlan, PeaksFollowTheBuffersLifetimes) {
  MemoryPlan plan;
  plan.buffers = {{"weights", MemCategory::kWeights, 100, 0, 9},
                  {"a", MemCategory::kActivations, 50, 0, 3},
                  {"b", MemCategory::kActivations, 70, 4, 9},
                  {"c", MemCategory::kActivations, 10, 2, 5}};
  const PlanPeaks peaks = plan_peaks(plan);
  // Activations: 50 (steps 0-1), 60 (2-3), 80 (4-5), 70 (6-9).
  EXPECT_EQ(peaks.by_category[static_cast<size_t>(MemCategory::kActivations)], 80u);
  EXPECT_EQ(peaks.by_category[static_cast<size_t>(MemCategory::kWeights)], 100u);
  EXPECT_EQ(peaks.total, 180u);
}

// A graph bound on a backend other than the one its declaration described is refused: its
// layouts would not be the backend's.
TEST(MemoryPlan, BindingOnABackendWithOtherTraitsIsRefused) {
  auto backend = make_backend(BackendKind::kCpu, {});
  Graph g = build_model("digits-cnn", ModelConfig{2, 8, 10, {}});
  BackendTraits channels_last;
  channels_last.activation_layout = Layout::kNHWC;
  g.declare(PrecisionPolicy{}, channels_last);
  Rng rng(0);
  EXPECT_THROW(g.bind(*backend, rng, naive_plan(g.step_schedule(), g.tensor_infos())),
               InvalidArgument);
  EXPECT_EQ(backend->allocator().stats().total_current, 0u);
}

struct SetupCase {
  const char* model;
  int64_t image_size;
  Precision precision;
};
void PrintTo(const SetupCase& c, std::ostream* os) {
  *os << c.model << " " << c.image_size << " " << precision_name(c.precision);
}

class NaivePlan : public ::testing::TestWithParam<SetupCase> {};

TEST_P(NaivePlan, IsWhatASetupAllocatesByteForByte) {
  const SetupCase c = GetParam();
  auto backend = make_backend(BackendKind::kCpu, {});
  const PrecisionPolicy policy = PrecisionPolicy::for_precision(c.precision);
  Graph g = build_model(c.model, ModelConfig{2, c.image_size, 10, {}});
  Rng rng(0);
  g.setup(*backend, rng, policy);
  // The one allocation outside the table: the backend's workspace, which it sizes from the
  // algorithms it chose as the layers made their plans (Graph::bind says why).
  const MemoryStats stats = backend->allocator().stats();
  const PlanPeaks peaks = plan_peaks(naive_plan(g.step_schedule(), g.tensor_infos()));
  const auto workspace = static_cast<size_t>(MemCategory::kWorkspace);
  for (size_t k = 0; k < kNumMemCategories; ++k) {
    if (k == workspace) continue;
    EXPECT_EQ(peaks.by_category[k], stats.current[k])
        << mem_category_name(static_cast<MemCategory>(k));
  }
  EXPECT_EQ(peaks.by_category[workspace], 0u);
  EXPECT_EQ(peaks.total, stats.total_current - stats.current[workspace]);
  // Declared without the backend, with its traits, the table is the same.
  Graph declared = build_model(c.model, ModelConfig{2, c.image_size, 10, {}});
  declared.declare(policy, BackendTraits::of(*backend, OpTypes::of(policy)));
  ASSERT_EQ(declared.tensor_infos().size(), g.tensor_infos().size());
  for (size_t id = 0; id < g.tensor_infos().size(); ++id) {
    const TensorInfo& a = declared.tensor_infos()[id];
    const TensorInfo& b = g.tensor_infos()[id];
    EXPECT_TRUE(a.name == b.name && a.kind == b.kind && a.node == b.node && a.shape == b.shape &&
                a.dtype == b.dtype && a.category == b.category && a.layout == b.layout &&
                a.alias_of == b.alias_of && a.offset == b.offset)
        << a.name;
  }
}

// A trainer binds once, from one plan: every byte of its step (the graph's tensors, the loss's,
// the optimizer's momentum, the loss scaler's state, the forward strategy's carried gradients) is
// a buffer of the naive plan of its schedule and table, allocated once each. The workspace is
// the one allocation outside it (Graph::bind says why).
TEST_P(NaivePlan, IsWhatATrainerAllocatesBufferForBuffer) {
  const SetupCase c = GetParam();
  for (OverlapStrategy strategy : {OverlapStrategy::kNone, OverlapStrategy::kForward}) {
    auto backend = make_backend(BackendKind::kCpu, {});
    Graph g = build_model(c.model, ModelConfig{2, c.image_size, 10, {}});
    g.declare_for(*backend, PrecisionPolicy::for_precision(c.precision));
    TrainConfig tc;
    tc.step.overlap = strategy;
    Rng rng(0);
    Trainer t(*backend, g, tc, rng);
    const MemoryPlan plan = naive_plan(t.schedule(), t.tensors());
    const MemoryStats stats = backend->allocator().stats();
    const auto workspace = static_cast<size_t>(MemCategory::kWorkspace);
    const PlanPeaks peaks = plan_peaks(plan);
    for (size_t k = 0; k < kNumMemCategories; ++k) {
      if (k == workspace) continue;
      EXPECT_EQ(peaks.by_category[k], stats.current[k])
          << mem_category_name(static_cast<MemCategory>(k)) << " " << overlap_name(strategy);
    }
    EXPECT_EQ(peaks.total, stats.total_current - stats.current[workspace]);
    // One allocation per planned buffer; every other one is the workspace's (grown as the
    // convolutions' plans ask).
    EXPECT_EQ(backend->allocator().allocations() - stats.allocations[workspace],
              plan.buffers.size())
        << overlap_name(strategy);
    // The step's state is in the table: the momentum and the scaler's state (fp16). (One rank
    // carries no gradient into the next step: schedule_test checks two ranks' carried tensors.)
    size_t momentum = 0, scaler = 0;
    for (const TensorInfo& info : t.tensors()) {
      momentum += info.name.rfind("momentum of ", 0) == 0;
      scaler += info.name == "loss-scale state";
    }
    EXPECT_EQ(momentum, g.flat_params().size());
    EXPECT_EQ(scaler, c.precision == Precision::kFp16 ? 1u : 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, NaivePlan,
                         ::testing::Values(SetupCase{"resnet18", 32, Precision::kFp32},
                                           SetupCase{"resnet18", 32, Precision::kBf16},
                                           SetupCase{"resnet18", 32, Precision::kFp16},
                                           SetupCase{"alexnet", 63, Precision::kFp32},
                                           SetupCase{"digits-cnn", 8, Precision::kFp32}),
                         [](const auto& info) {
                           std::string n = std::string(info.param.model) + "_" +
                                           std::string(precision_name(info.param.precision));
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace dlb

namespace dlb {
namespace {

// reuse_plan: no two tensors whose lifetimes meet share a byte, for every reference model on one
// rank, each case (SetupCase, above) in one precision; and training on it computes exactly what
// training on the naive plan does (the same bits of losses, weights and buffers after 5 steps),
// with and without recomputation (runtime/nn/recompute.h).
class ReusePlan : public ::testing::TestWithParam<SetupCase> {};

// Trains 5 steps on one batch with `plan`: (the losses, the checksum of the state (parameters,
// running statistics and counts), the trainer's plan and schedule checked for overlaps).
struct Trained {
  std::vector<float> losses;
  uint64_t state = 0;
  size_t planned = 0, naive = 0, recomputed = 0, swapped = 0;
  size_t activation_peak = 0;
  size_t peak = 0;  // the allocator's peak of the total, over the trainer's life
  // The activation buffers the plan has, and the allocations of activations the allocator saw
  // (the step bound once: as many).
  size_t activation_buffers = 0, activation_allocations = 0;
};
uint64_t state_checksum(const Graph& g) {
  uint64_t h = kFnv1aOffset;
  for (const auto& [name, t] : g.state_dict()) {
    h = fnv1a(name.data(), name.size(), h);
    h = fnv1a(t.bytes.data(), t.bytes.size(), h);
  }
  return h;
}
// The CPU backend, but a swap's copy happens as late as a copy queue may run it: when the
// compute lane waits for it (Backend::wait_for_copy), not when it is issued. A copy out whose
// device bytes a pass overwrites before the wait copies the wrong bytes; a pass that reads a
// copy's destination before the wait reads what was there before. (The CPU itself copies as
// early as possible, when the copy is issued: the two ends of what a GPU's copy engine may do.)
class LateCopies final : public DelegatingBackend {
 public:
  LateCopies() : DelegatingBackend(make_backend(BackendKind::kCpu, {})) {}
  CopyMarks swap_copy(const Tensor& src, Tensor& dst) override {
    const int id = next_++;
    pending_.emplace(id, std::make_pair(src, dst));
    const Mark m{static_cast<double>(id), {}};
    return {m, m};
  }
  void wait_for_copy(const Mark& copied) override {
    auto it = pending_.find(static_cast<int>(copied.us));
    if (it == pending_.end()) return;  // waited for already
    DelegatingBackend::copy(it->second.first, it->second.second);
    pending_.erase(it);
  }
  size_t pending() const { return pending_.size(); }

 private:
  int next_ = 0;
  std::map<int, std::pair<Tensor, Tensor>> pending_;
};

// The activations a trainer of `c` can swap, with `recompute` (over a reordered backward for
// kReorder), by name: from the graph's own step (the trainer's adds the loss and the sync
// policy's passes, which leave every one of them a candidate).
SwapPolicy swap_every_candidate(const SetupCase& c, MemoryPlanKind kind,
                                const RecomputePolicy& recompute) {
  Graph g = build_model(c.model, ModelConfig{2, c.image_size, 10, {}});
  g.declare(PrecisionPolicy::for_precision(c.precision), BackendTraits{});
  const std::vector<int> kept = {g.output_id(g.output())};
  const Schedule step = kind == MemoryPlanKind::kReorder
                            ? reorder_backward(g.step_schedule(), g.tensor_infos(), kept)
                            : g.step_schedule();
  const Schedule s = recompute_schedule(step, g.tensor_infos(), recompute, kept);
  SwapPolicy p{SwapPolicy::Kind::kList, {}};
  for (int t : swap_candidates(s, g.tensor_infos(), kept))
    p.names.push_back(g.tensor_infos()[t].name);
  return p;
}

Trained train_with(const SetupCase& c, OverlapStrategy strategy, MemoryPlanKind kind,
                   RecomputePolicy recompute = {}, SwapPolicy swap = {}, bool late = false,
                   std::optional<size_t> budget = std::nullopt) {
  BackendOptions options;
  options.memory_budget = budget;
  std::unique_ptr<Backend> backend =
      late ? std::make_unique<LateCopies>() : make_backend(BackendKind::kCpu, options);
  Graph g = build_model(c.model, ModelConfig{2, c.image_size, 10, {}});
  g.declare_for(*backend, PrecisionPolicy::for_precision(c.precision));
  TrainConfig tc;
  tc.step.overlap = strategy;
  tc.step.memory_plan = kind;
  tc.step.recompute = recompute;
  tc.step.swap = swap;
  tc.sgd = SgdConfig{0.01f, 0.9f, 1e-4f};
  // Poison (reuse): after the last pass that may read a shared tensor's contents (the end of each
  // span of its lifetime: a recomputed tensor has two), its bytes become 0xFF (NaN in every
  // float format), so a pass that reads it later without saying so (a read missing from its
  // Step::reads, or a recomputation missing) computes NaN instead of a value that happened to
  // survive.
  auto dies = std::make_shared<std::vector<std::vector<int>>>();
  const Trainer* trainer = nullptr;  // the hook runs in its steps, after it is made
  tc.after_pass_hook = [&trainer, dies](size_t pass) {
    if (pass >= dies->size()) return;
    for (int id : (*dies)[pass]) {
      Tensor& t = trainer->bound().tensor(id);
      std::memset(t.raw(), 0xFF, t.bytes());
    }
  };
  Rng rng(0);
  Trainer t(*backend, g, tc, rng);
  trainer = &t;
  // The property: tensors sharing a buffer either live at disjoint steps or sit at disjoint
  // bytes.
  const MemoryPlan& plan = t.memory_plan();
  const std::vector<Lifetime> life =
      lifetimes(t.schedule(), t.tensors(), {g.output_id(g.output())});
  const auto& infos = t.tensors();
  for (size_t a = 0; a < infos.size(); ++a) {
    if (plan.buffer_of[a] < 0) continue;
    for (size_t b = a + 1; b < infos.size(); ++b) {
      if (plan.buffer_of[b] != plan.buffer_of[a]) continue;
      const bool meet = life[a].meets(life[b]);
      const size_t a0 = plan.offset_of[a], b0 = plan.offset_of[b];
      const bool overlap = a0 < b0 + infos[b].bytes() && b0 < a0 + infos[a].bytes();
      EXPECT_FALSE(meet && overlap) << infos[a].name << " and " << infos[b].name;
    }
  }
  if (kind != MemoryPlanKind::kNaive) {
    dies->resize(t.schedule().steps.size());
    for (size_t id = 0; id < infos.size(); ++id) {
      if (plan.buffer_of[id] < 0 || life[id].whole) continue;
      for (const auto& span : life[id].spans) (*dies)[span.second].push_back(static_cast<int>(id));
    }
  }
  const Dataset d = make_synthetic(2, g.nodes()[0].shape[1], c.image_size, 10, 5);
  t.load_batch(d.images.data(), d.labels.data());
  Trained out;
  out.losses = t.run(0, 5).losses;
  t.flush();
  out.state = state_checksum(g);
  out.planned = plan.device_bytes();
  out.naive = t.naive_plan_bytes();
  out.activation_peak =
      plan_peaks(plan).by_category[static_cast<size_t>(MemCategory::kActivations)];
  for (const Step& s : t.schedule().steps) out.recomputed += s.pass == Pass::kRecompute;
  out.swapped = t.swapped().size();
  out.peak = backend->allocator().stats().total_peak;
  const auto activations = static_cast<size_t>(MemCategory::kActivations);
  for (const PlannedBuffer& b : plan.buffers)
    out.activation_buffers += b.category == MemCategory::kActivations;
  out.activation_allocations = backend->allocator().stats().allocations[activations];
  EXPECT_TRUE(check_schedule(t.schedule(), infos).empty());
  if (late) {
    EXPECT_EQ(static_cast<LateCopies&>(*backend).pending(), 0u) << "a copy never waited for";
  }
  return out;
}

TEST_P(ReusePlan, SharesNoLiveByteAndTrainsTheSameBits) {
  const SetupCase c = GetParam();
  // One rank: every strategy has the same schedule (no reduction to place), so one suffices;
  // tests/integration/strategies_agree.sh runs each strategy on two ranks.
  const OverlapStrategy strategy = OverlapStrategy::kBackward;
  const Trained naive_cpu = train_with(c, strategy, MemoryPlanKind::kNaive);
  ASSERT_EQ(naive_cpu.losses.size(), 5u);
  // LateCopies runs the composed ops (a convolution with its bias) as their parts, which rounds
  // a 16-bit run otherwise: its runs are compared with its own naive run.
  const Trained naive_late = train_with(c, strategy, MemoryPlanKind::kNaive, {}, {}, true);
  const RecomputePolicy none, sqrt{RecomputePolicy::Kind::kSqrt, 0},
      every2{RecomputePolicy::Kind::kEvery, 2};
  // Swapping every candidate, its copies made when waited for (LateCopies: the strictest order a
  // copy queue allows; the CPU's own, when issued, is strategies_agree.sh's); and with
  // recomputation, the checkpoints that stay, except for vgg16 and alexnet (their largest
  // layers make each run long under the sanitizers; strategies_agree.sh --wide trains them so).
  const SwapPolicy all = swap_every_candidate(c, MemoryPlanKind::kReuse, none), no_swap;
  const SwapPolicy checkpoints = swap_every_candidate(c, MemoryPlanKind::kReorder, sqrt);
  struct Variant {
    MemoryPlanKind kind;
    RecomputePolicy recompute;
    SwapPolicy swap;
    bool late;
  };
  const Variant variants[] = {{MemoryPlanKind::kReuse, none, no_swap, false},
                              {MemoryPlanKind::kReuse, sqrt, no_swap, false},
                              {MemoryPlanKind::kReuse, every2, no_swap, false},
                              {MemoryPlanKind::kReorder, sqrt, no_swap, false},
                              {MemoryPlanKind::kReuse, none, all, true},
                              {MemoryPlanKind::kReorder, sqrt, checkpoints, true}};
  const bool large = std::string(c.model) == "vgg16" || std::string(c.model) == "alexnet";
  ASSERT_FALSE(all.names.empty());
  for (const auto& [kind, recompute, swap, late] : variants) {
    // The one variant that recomputes and swaps: the checkpoints'.
    if (large && recompute.kind != RecomputePolicy::Kind::kNone && !swap.names.empty()) continue;
    const std::string what =
        std::string(memory_plan_name(kind)) + ", recompute " + recompute_name(recompute) +
        ", swap " +
        (swap.names.empty()                               ? swap_name(swap)
         : recompute.kind == RecomputePolicy::Kind::kNone ? "every candidate"
                                                          : "every checkpoint") +
        (late ? " (copies when waited for)" : "");
    const Trained reuse = train_with(c, strategy, kind, recompute, swap, late);
    const Trained& naive = late ? naive_late : naive_cpu;
    for (size_t i = 0; i < 5; ++i) {
      // Bit for bit: the same arithmetic in the same order, only at other addresses (and a
      // recomputed pass computes what the first one did).
      EXPECT_EQ(std::memcmp(&naive.losses[i], &reuse.losses[i], sizeof(float)), 0)
          << what << " step " << i << ": " << naive.losses[i] << " vs " << reuse.losses[i];
    }
    EXPECT_EQ(naive.state, reuse.state) << what;
    EXPECT_LT(reuse.planned, naive.planned) << what;
    EXPECT_EQ(reuse.recomputed > 0, recompute.kind != RecomputePolicy::Kind::kNone) << what;
    EXPECT_EQ(reuse.swapped, swap.names.size()) << what;
    std::printf("%s %s: naive %s, %s %s (activations %s, %zu passes recomputed)\n", c.model,
                std::string(precision_name(c.precision)).c_str(),
                format_bytes(naive.planned).c_str(), what.c_str(),
                format_bytes(reuse.planned).c_str(), format_bytes(reuse.activation_peak).c_str(),
                reuse.recomputed);
  }
}

// --swap=auto under a budget just below what reuse alone takes, so that the plan's tensors fit
// only less the workspace: the layers' plans are made first (Graph::plan_ops), so the workspace
// is held when the program is built, and the program swaps, is bound once (every activation
// buffer allocated once) and fits the budget. It trains the same bits as the naive plan.
TEST(SwapAuto, KnowsTheWorkspaceBeforeTheProgramAndBindsItOnceWithinTheBudget) {
  const SetupCase c{"resnet18", 32, Precision::kFp32};
  const OverlapStrategy strategy = OverlapStrategy::kBackward;
  const Trained naive = train_with(c, strategy, MemoryPlanKind::kNaive);
  const Trained reuse = train_with(c, strategy, MemoryPlanKind::kReuse);
  const size_t budget = reuse.peak - 128 * 1024;
  const Trained swapped = train_with(c, strategy, MemoryPlanKind::kReuse, {},
                                     SwapPolicy{SwapPolicy::Kind::kAuto, {}}, false, budget);
  EXPECT_GT(swapped.swapped, 0u);
  EXPECT_EQ(swapped.activation_allocations, swapped.activation_buffers);
  EXPECT_LE(swapped.peak, budget);
  EXPECT_EQ(naive.state, swapped.state);
  EXPECT_EQ(std::memcmp(naive.losses.data(), swapped.losses.data(), 5 * sizeof(float)), 0);
  std::printf("resnet18 32px: reuse peak %s; auto under %s swapped %zu tensors, peak %s\n",
              format_bytes(reuse.peak).c_str(), format_bytes(budget).c_str(), swapped.swapped,
              format_bytes(swapped.peak).c_str());
}

INSTANTIATE_TEST_SUITE_P(Models, ReusePlan,
                         ::testing::Values(SetupCase{"resnet18", 32, Precision::kFp32},
                                           SetupCase{"resnet18", 32, Precision::kBf16},
                                           SetupCase{"resnet50", 32, Precision::kFp32},
                                           SetupCase{"vgg16", 32, Precision::kFp32},
                                           SetupCase{"alexnet", 63, Precision::kBf16},
                                           SetupCase{"digits-cnn", 8, Precision::kFp16}),
                         [](const auto& info) {
                           return std::string(info.param.model == std::string("digits-cnn")
                                                  ? "digits_cnn"
                                                  : info.param.model) +
                                  "_" + std::string(precision_name(info.param.precision));
                         });

}  // namespace
}  // namespace dlb

namespace dlb {
namespace {

// What reuse saves on the graph's own step at 64x64, batch 32: an activation (or its gradient)
// lives from its forward to its layer's backward, so at any pass only the layers not yet
// back-propagated hold theirs, and gradients of finished layers are free again. The plan's
// arena is deterministic; it must hold under 40% of the naive activation bytes (Fujitsu's
// reordering doubled VGG's batch; issue 28 asks for at least 40% less).
TEST(ReusePlanFigures, ActivationsOfTheGraphsStep) {
  for (const char* model : {"vgg16", "resnet50"}) {
    Graph g = build_model(model, ModelConfig{32, 64, 1000, {}});
    g.declare(PrecisionPolicy{}, BackendTraits{});
    const MemoryPlan naive = naive_plan(g.step_schedule(), g.tensor_infos());
    const MemoryPlan reuse =
        reuse_plan(g.step_schedule(), g.tensor_infos(), {g.output_id(g.output())});
    const auto act = static_cast<size_t>(MemCategory::kActivations);
    std::printf("%s 64px batch 32: activations naive %s reuse %s; total %s -> %s\n", model,
                format_bytes(plan_peaks(naive).by_category[act]).c_str(),
                format_bytes(plan_peaks(reuse).by_category[act]).c_str(),
                format_bytes(naive.bytes()).c_str(), format_bytes(reuse.bytes()).c_str());
    EXPECT_LT(plan_peaks(reuse).by_category[act], 0.4 * plan_peaks(naive).by_category[act])
        << model;
    EXPECT_EQ(reuse_plan(g.step_schedule(), g.tensor_infos(), {g.output_id(g.output())}).bytes(),
              reuse.bytes())
        << "deterministic";
  }
}

}  // namespace
}  // namespace dlb

namespace dlb {
namespace {

// The guard's red zones sit around buffers: a trainer refuses a shared-buffer plan on a guarded
// backend, whoever asks (not only the command line).
TEST(ReusePlanRefusal, AGuardedBackendTakesOnlyTheNaivePlan) {
  BackendOptions o;
  o.memory_guard = true;
  auto backend = make_backend(BackendKind::kCpu, o);
  Graph g = build_model("digits-cnn", ModelConfig{2, 8, 10, {}});
  g.declare_for(*backend);
  TrainConfig tc;
  tc.step.memory_plan = MemoryPlanKind::kReuse;
  Rng rng(0);
  EXPECT_THROW(Trainer(*backend, g, tc, rng), Unsupported);
}

}  // namespace
}  // namespace dlb

namespace dlb {
namespace {

// The property, with no backend: for every reference model, precision, overlap strategy (on
// several ranks, with small buckets, so each strategy places its own reductions, waits,
// updates and carried gradients) and recomputation policy (every:2 over a reordered backward),
// declared as the CPU backend and as the CUDA backend would (batch norm + ReLU fused, 16-bit
// activations channels-last), the reuse plan of the step's schedule, with every candidate swapped
// (runtime/nn/swap.h) under none and sqrt, puts no two tensors whose lifetimes meet on a common
// byte, no swap's copy races a pass (check_swaps), and recomputing and swapping add nothing that
// check_schedule finds.
TEST(ReusePlanProperty, NoTwoLiveTensorsShareAByteInAnyModelStrategyPrecisionOrRecomputation) {
  const std::pair<const char*, int64_t> models[] = {
      {"resnet18", 32}, {"resnet50", 32}, {"vgg16", 32}, {"alexnet", 63}, {"digits-cnn", 8}};
  size_t checked = 0;
  for (const auto& [model, size] : models) {
    for (Precision precision : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
      for (OverlapStrategy strategy : kOverlapStrategies) {
        for (const char* policy : {"none", "sqrt", "every:2"}) {
          // The CUDA backend's graph too: batch norm with its ReLU fused (the ReLU's output a
          // view), 16-bit activations channels-last and max pooling's argmax kept; declared
          // without a GPU.
          for (bool cuda : {false, true}) {
            const bool narrow = precision != Precision::kFp32;
            const BackendTraits traits =
                cuda ? BackendTraits{narrow ? Layout::kNHWC : Layout::kNCHW, true, false, true}
                     : BackendTraits{};
            Graph g = build_model(model, ModelConfig{2, size, 10, {}});
            g.declare(PrecisionPolicy::for_precision(precision), traits);
            std::vector<int64_t> numels;
            for (const ParamIds& p : g.flat_params())
              numels.push_back(g.tensor_infos()[p.value].shape.numel());
            const BucketPlan buckets =
                make_bucket_plan(g.grad_offsets(), numels, dtype_size(g.policy().gradients), 1.0);
            const std::vector<int> kept = {g.output_id(g.output())};
            const std::vector<std::string> alone =
                check_schedule(g.step_schedule(), g.tensor_infos());
            // reorder's schedule with every:2, the others' with none and sqrt.
            const bool reorder = std::string(policy) == "every:2";
            Schedule s = recompute_schedule(
                reorder ? reorder_backward(g.step_schedule(), g.tensor_infos(), kept)
                        : g.step_schedule(),
                g.tensor_infos(), *parse_recompute(policy), kept);
            // none and sqrt swap every candidate too (sqrt: the checkpoints that stay).
            const bool swap = !reorder;
            std::vector<TensorInfo> infos = g.tensor_infos();  // the step's table
            if (swap) {
              SwappedSchedule swapped = swap_schedule(s, infos, swap_candidates(s, infos, kept));
              EXPECT_FALSE(swapped.host_copies.empty()) << model;
              for (TensorInfo& host : swapped.host_copies) declare_tensor(infos, std::move(host));
              s = std::move(swapped.schedule);
            }
            insert_sync(s, infos, g, buckets,
                        SyncOptions{strategy, 2, precision == Precision::kFp16});
            const std::string what =
                fmt::format("{} {} {} recompute {}{}{}", model, precision_name(precision),
                            overlap_name(strategy), policy, swap ? ", every candidate swapped" : "",
                            cuda ? ", CUDA's traits" : "");
            // Without the loss pass, the output's gradient is read before any pass writes it
            // (and the forward strategy's carried gradients, which an earlier step writes): those
            // findings, in whatever order the passes now run, and no other.
            const std::string out_grad = g.tensor_infos()[g.grad_id(g.output())].name;
            for (const std::string& finding : check_schedule(s, infos)) {
              const bool expected = finding.find("reads " + out_grad + " ") != std::string::npos ||
                                    (strategy == OverlapStrategy::kForward &&
                                     finding.find("carried") != std::string::npos);
              EXPECT_TRUE(expected) << what << ": " << finding;
            }
            const MemoryPlan plan = reuse_plan(s, infos, kept);
            const std::vector<Lifetime> life = lifetimes(s, infos, kept);
            for (size_t a = 0; a < infos.size(); ++a) {
              if (plan.buffer_of[a] < 0 || life[a].whole) continue;
              for (size_t b = a + 1; b < infos.size(); ++b) {
                if (plan.buffer_of[b] != plan.buffer_of[a] || !life[a].meets(life[b])) continue;
                const size_t a0 = plan.offset_of[a], b0 = plan.offset_of[b];
                EXPECT_FALSE(a0 < b0 + infos[b].bytes() && b0 < a0 + infos[a].bytes())
                    << what << ": " << infos[a].name << " and " << infos[b].name;
              }
            }
            // No copy races a pass, among the sync policy's passes too.
            for (const std::string& race : check_swaps(s, infos, plan))
              ADD_FAILURE() << what << ": " << race;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 5u * 3 * 3 * 3 * 2);
}

}  // namespace
}  // namespace dlb
