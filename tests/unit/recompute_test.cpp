// Recomputation and reordering as transformations of the schedule (runtime/nn/recompute.h,
// reorder.h), on a chain whose
// schedule, lifetimes and planned bytes can be worked out by hand; every reference model trains
// the same bits with it in tests/unit/memory_plan_test.cpp (ReusePlan).
#include "runtime/nn/recompute.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/nn/graph.h"
#include "runtime/nn/layers/elementwise.h"
#include "runtime/nn/layers/linear.h"
#include "runtime/nn/memory_plan.h"
#include "runtime/nn/reorder.h"

namespace dlb {
namespace {

TEST(Recompute, ParsesItsPolicies) {
  EXPECT_EQ(parse_recompute("none"), RecomputePolicy{});
  EXPECT_EQ(parse_recompute("sqrt")->kind, RecomputePolicy::Kind::kSqrt);
  EXPECT_EQ(parse_recompute("every:3")->every, 3);
  for (const char* bad : {"", "every", "every:", "every:0", "every:-2", "every:2x", "every: 2",
                          "Sqrt", "all", "every:99999999999999999999"}) {
    EXPECT_FALSE(parse_recompute(bad)) << bad;
  }
  for (const char* text : {"none", "sqrt", "every:1", "every:12"})
    EXPECT_EQ(recompute_name(*parse_recompute(text)), text);
}

TEST(Recompute, SegmentsOfForwardPasses) {
  using V = std::vector<int64_t>;
  EXPECT_EQ(forward_segments(*parse_recompute("none"), 4), (V{0, 0, 0, 0}));
  EXPECT_EQ(forward_segments(*parse_recompute("every:2"), 5), (V{0, 0, 1, 1, 2}));
  // sqrt: ceil(sqrt(10)) = 4 passes a segment.
  EXPECT_EQ(forward_segments(*parse_recompute("sqrt"), 10), (V{0, 0, 0, 0, 1, 1, 1, 1, 2, 2}));
  EXPECT_TRUE(forward_segments(*parse_recompute("sqrt"), 0).empty());
}

// Six linear layers 16 -> 16 on a batch of 8: every activation and gradient is 8 x 16 floats,
// 512 bytes (a multiple of the plan's 256-byte alignment). Without the loss pass, the output
// fc6 is kept (the logits) and its gradient is read before it is written: both are held over
// the whole step, 1024 bytes. Backward runs fc6..fc1, each layer's data pass (reads its output's
// gradient, writes its input's) before its weights pass (reads its input and its output's
// gradient); fc1 has no data pass (its input is the batch).
struct Chain {
  Graph g{Shape{8, 16}};
  Chain() {
    int prev = g.input();
    for (int i = 1; i <= 6; ++i) {
      prev = g.add("fc" + std::to_string(i), std::make_unique<Linear>(16, 16), {prev});
    }
    g.declare(PrecisionPolicy{}, BackendTraits{});
  }
  std::vector<int> kept() const { return {g.output_id(g.output())}; }
  // What check_schedule finds in the graph's step alone: the output's gradient is read before
  // any pass writes it (the loss pass, which the trainer adds). Recomputing adds nothing to it.
  std::vector<std::string> checked_alone() const {
    return check_schedule(g.step_schedule(), g.tensor_infos());
  }
  Schedule schedule(const char* policy) const {
    return recompute_schedule(g.step_schedule(), g.tensor_infos(), *parse_recompute(policy),
                              kept());
  }
  // "recompute fc3" for each recomputation, with its index in the schedule.
  std::vector<std::pair<size_t, std::string>> recomputed(const Schedule& s) const {
    std::vector<std::pair<size_t, std::string>> out;
    for (size_t i = 0; i < s.steps.size(); ++i) {
      if (s.steps[i].pass == Pass::kRecompute) out.push_back({i, g.nodes()[s.steps[i].node].name});
    }
    return out;
  }
  using Spans = std::vector<std::pair<size_t, size_t>>;
  Spans spans(const Schedule& s, const std::string& name) const {
    const auto life = lifetimes(s, g.tensor_infos(), kept());
    for (size_t t = 0; t < life.size(); ++t)
      if (g.tensor_infos()[t].name == name) return life[t].spans;
    ADD_FAILURE() << "no tensor " << name;
    return {};
  }
  size_t activation_peak(const Schedule& s) const {
    return plan_peaks(reuse_plan(s, g.tensor_infos(), kept()))
        .by_category[static_cast<size_t>(MemCategory::kActivations)];
  }
};

// none: forward passes 0-5 (fc1..fc6), then fc6's data and weights passes (6, 7), fc5's (8, 9),
// ..., fc2's (14, 15), fc1's weights pass (16). An activation lives from its forward pass to the
// weights pass of the layer after it (fc1 [0, 15]), a gradient from the data pass that writes it
// to the weights pass that reads it last (grad of fc5 [6, 9]). The naive plan stores the 12
// tensors apart: 6144 bytes. Reuse places them largest first, ties in declaration order (fc1,
// grad of fc1, fc2, ...), each at the lowest 512-byte slot free over its lifetime: fc1 0; grad
// of fc1 [14, 16] meets fc1: 512; fc2 [1, 13] meets fc1: 512; grad of fc2 [12, 15] meets fc1
// and fc2: 1024; fc3 1024; grad of fc3 1536; fc4 1536; grad of fc4 2048; fc5 2048; grad of fc5
// [6, 9] meets fc1..fc5 and grad of fc4: 2560. An arena of 3072 bytes, and 1024 held whole:
// 4096.
TEST(Recompute, NoneLeavesTheScheduleAndItsPlan) {
  const Chain c;
  const Schedule s = c.schedule("none");
  EXPECT_EQ(s.steps.size(), 17u);
  EXPECT_TRUE(c.recomputed(s).empty());
  EXPECT_EQ(c.spans(s, "fc1"), (Chain::Spans{{0, 15}}));
  EXPECT_EQ(c.spans(s, "grad of fc5"), (Chain::Spans{{6, 9}}));
  EXPECT_EQ(plan_peaks(naive_plan(s, c.g.tensor_infos()))
                .by_category[static_cast<size_t>(MemCategory::kActivations)],
            6144u);
  EXPECT_EQ(c.activation_peak(s), 4096u);
}

// every:2: segments {fc1, fc2}, {fc3, fc4}, {fc5, fc6}; fc2 and fc4 are checkpoints, the last
// segment stays, so fc1 and fc3 are recomputed, each just before the first pass that reads it:
// fc3 before fc4's weights pass (now 12), fc1 before fc2's weights pass (now 17). fc1 holds
// contents over [0, 1] (read by fc2's forward) and [16, 17]; fc3 over [2, 3] and [11, 12]. In
// the 19 passes, placed as above: fc1 0; grad of fc1 [15, 18] 512; fc2 [1, 14] 512; grad of fc2
// [13, 17] 1024; fc3 now meets only fc1's first span and fc2: 0 is free over [2, 3] and [11, 12],
// so 0; grad of fc3 [10, 14] meets fc2, fc3 and grad of fc2: 1536; fc4 [3, 9] meets fc2 and fc3:
// 1024; grad of fc4 [8, 12] meets fc2, fc3, fc4, grad of fc3: 2048; fc5 [4, 7] meets fc2, fc4:
// 0; grad of fc5 [6, 9] meets fc2, fc4, fc5, grad of fc4: 1536. An arena of 2560: 3584 in all.
TEST(Recompute, EveryTwoRecomputesTheFirstOfEachPairButTheLast) {
  const Chain c;
  const Schedule s = c.schedule("every:2");
  EXPECT_EQ(check_schedule(s, c.g.tensor_infos()), c.checked_alone());
  EXPECT_EQ(c.recomputed(s),
            (std::vector<std::pair<size_t, std::string>>{{11, "fc3"}, {16, "fc1"}}));
  EXPECT_EQ(c.spans(s, "fc1"), (Chain::Spans{{0, 1}, {16, 17}}));
  EXPECT_EQ(c.spans(s, "fc3"), (Chain::Spans{{2, 3}, {11, 12}}));
  EXPECT_EQ(c.spans(s, "fc2"), (Chain::Spans{{1, 14}}));
  EXPECT_EQ(c.activation_peak(s), 3584u);
}

// sqrt: ceil(sqrt(6)) = 3 passes a segment, {fc1, fc2, fc3} and {fc4, fc5, fc6}: fc3 is the
// checkpoint, fc1 and fc2 are recomputed together, in forward order, before fc3's weights pass
// (the first reader of fc2; now 15, after them at 13 and 14). fc1 [0, 1] [13, 17]; fc2 [1, 2]
// [14, 15]. Placed: fc1 0; grad of fc1 [16, 18] 512; fc2 meets fc1: 512; grad of fc2 [12, 17]
// meets fc1, fc2: 1024; fc3 [2, 11] meets fc2's first span only: 0; grad of fc3 [10, 15] meets
// fc1, fc2, fc3, grad of fc2: 1536; fc4 [3, 9] meets fc3: 512; grad of fc4 [8, 11] meets fc3,
// fc4, grad of fc3: 1024; fc5 [4, 7] meets fc3, fc4: 1024; grad of fc5 [6, 9] meets fc3, fc4,
// fc5, grad of fc4: 1536. An arena of 2048: 3072 in all, half of naive.
TEST(Recompute, SqrtRecomputesWholeSegmentsInForwardOrder) {
  const Chain c;
  const Schedule s = c.schedule("sqrt");
  EXPECT_EQ(check_schedule(s, c.g.tensor_infos()), c.checked_alone());
  EXPECT_EQ(c.recomputed(s),
            (std::vector<std::pair<size_t, std::string>>{{13, "fc1"}, {14, "fc2"}}));
  EXPECT_EQ(c.spans(s, "fc1"), (Chain::Spans{{0, 1}, {13, 17}}));
  EXPECT_EQ(c.spans(s, "fc2"), (Chain::Spans{{1, 2}, {14, 15}}));
  EXPECT_EQ(c.activation_peak(s), 3072u);
}

// reorder (runtime/nn/reorder.h): each layer's weights pass is the last reader of its input,
// which its data pass does not read, so it goes first: fc6's weights pass (6) then data pass
// (7), ..., fc2's (14, 15), fc1's weights pass (16). An input is free after the weights pass
// that reads it, before the data pass writes the next gradient: fc5 [4, 6], grad of fc5 [7, 9],
// fc4 [3, 8], grad of fc4 [9, 11], ..., fc1 [0, 14], grad of fc1 [15, 16]. Placed in
// declaration order at the lowest free slot: fc1 0; grad of fc1 [15, 16] meets nothing: 0; fc2
// 512; grad of fc2 [13, 15] meets fc1 and grad of fc1: 512; fc3 1024; grad of fc3 [11, 13]
// meets fc1, fc2 and grad of fc2: 1024; fc4 1536; grad of fc4 [9, 11] meets fc1, fc2, fc3 and
// grad of fc3: 1536; fc5 2048; grad of fc5 [7, 9] meets fc1..fc4 and grad of fc4: 2048. An
// arena of 2560, and 1024 whole: 3584, where reuse alone needs 4096.
TEST(Reorder, WeightsPassesGoFirstWhereTheyFreeTheInput) {
  const Chain c;
  const Schedule s = reorder_backward(c.g.step_schedule(), c.g.tensor_infos(), c.kept());
  // The same findings as the graph's step alone, the output gradient's two readers now the
  // other way round.
  EXPECT_EQ(check_schedule(s, c.g.tensor_infos()),
            (std::vector<std::string>{
                "step 6 (backward_weights) reads grad of fc6 (activation_grad), which no earlier "
                "step wrote",
                "step 7 (backward_data) reads grad of fc6 (activation_grad), which no earlier step "
                "wrote"}));
  std::vector<std::string> order;
  for (size_t i = 6; i < s.steps.size(); ++i) {
    order.push_back(std::string(pass_name(s.steps[i].pass)) + " " +
                    c.g.nodes()[s.steps[i].node].name);
  }
  EXPECT_EQ(order, (std::vector<std::string>{
                       "backward_weights fc6", "backward_data fc6", "backward_weights fc5",
                       "backward_data fc5", "backward_weights fc4", "backward_data fc4",
                       "backward_weights fc3", "backward_data fc3", "backward_weights fc2",
                       "backward_data fc2", "backward_weights fc1"}));
  EXPECT_EQ(c.spans(s, "fc5"), (Chain::Spans{{4, 6}}));
  EXPECT_EQ(c.spans(s, "grad of fc5"), (Chain::Spans{{7, 9}}));
  EXPECT_EQ(c.spans(s, "fc1"), (Chain::Spans{{0, 14}}));
  EXPECT_EQ(c.activation_peak(s), 3584u);
}

// The graph's passes with the loss between them, which writes the output's gradient (the
// residual add's inputs' gradients are views of it).
Schedule with_loss(const Graph& g) {
  Schedule s = g.forward_schedule();
  Step loss;
  loss.pass = Pass::kLoss;
  loss.node = g.output();
  loss.reads = {g.output_id(g.output())};
  loss.writes = {g.grad_id(g.output())};
  s.steps.push_back(loss);
  const Schedule& backward = g.backward_schedule();
  s.steps.insert(s.steps.end(), backward.steps.begin(), backward.steps.end());
  link_dependencies(s, g.tensor_infos());
  return s;
}

// A residual connection across a segment boundary: the block's input is read by a forward pass
// of the next segment, so it stays until backward instead of being recomputed.
TEST(Recompute, AnInputReadAcrossASegmentBoundaryIsKept) {
  Graph g{Shape{8, 16}};
  const int a = g.add("a", std::make_unique<Linear>(16, 16), {g.input()});
  const int b = g.add("b", std::make_unique<Linear>(16, 16), {a});
  const int c = g.add("c", std::make_unique<Linear>(16, 16), {b});
  const int d = g.add("d", std::make_unique<Linear>(16, 16), {c});
  g.add("sum", std::make_unique<Add>(), {d, a});  // a read again, two segments later
  g.declare(PrecisionPolicy{}, BackendTraits{});
  // every:2: {a, b}, {c, d}, {sum}; b and d are checkpoints; a is read by sum's forward
  // (segment 2): kept, not recomputed; c is.
  const Schedule s = recompute_schedule(with_loss(g), g.tensor_infos(), *parse_recompute("every:2"),
                                        {g.output_id(g.output())});
  EXPECT_EQ(check_schedule(with_loss(g), g.tensor_infos()), std::vector<std::string>{});
  EXPECT_EQ(check_schedule(s, g.tensor_infos()), std::vector<std::string>{});
  std::vector<std::string> again;
  for (const Step& step : s.steps) {
    if (step.pass == Pass::kRecompute) again.push_back(g.nodes()[step.node].name);
  }
  EXPECT_EQ(again, std::vector<std::string>{"c"});
}

}  // namespace
}  // namespace dlb
