// Swapping (runtime/nn/swap.h): the policy's text, which tensors can be swapped, where the
// copies and waits go, the exact plan of a small chain, what --swap=auto picks, and that
// check_swaps finds a copy that races a pass. Training with swaps, bit for bit as the naive plan
// and with each copy's bytes poisoned the moment it may be gone, with copies made when issued
// and when waited for, is memory_plan_test.cpp's ReusePlan (and its SwapAuto: the trainer's
// second plan); the order of copies and waits against the backend's logged work,
// stream_order_test.cpp's.
#include "runtime/nn/swap.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/nn/graph.h"
#include "runtime/nn/layers/linear.h"
#include "runtime/nn/recompute.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

TEST(SwapPolicy, ParsesNoneAutoAndLists) {
  EXPECT_EQ(parse_swap("none"), SwapPolicy{});
  EXPECT_EQ(parse_swap("all")->kind, SwapPolicy::Kind::kAll);
  EXPECT_EQ(parse_swap("auto")->kind, SwapPolicy::Kind::kAuto);
  const SwapPolicy list = *parse_swap("layer1.0.conv1,fc");
  EXPECT_EQ(list.kind, SwapPolicy::Kind::kList);
  EXPECT_EQ(list.names, (std::vector<std::string>{"layer1.0.conv1", "fc"}));
  for (const char* bad : {"", ",", "a,", ",a", "a,,b", "a,a"}) {
    EXPECT_FALSE(parse_swap(bad)) << "'" << bad << "'";
  }
  for (const char* text : {"none", "all", "auto", "conv1", "conv1,layer1.0.relu"}) {
    EXPECT_EQ(swap_name(*parse_swap(text)), text);
  }
}

// Six 16x16 linear layers on a batch of 8 in f32: every activation and gradient is 512 bytes.
// The graph's step (recompute_test.cpp's chain): forward passes 0-5 (fc1..fc6), then each
// layer's data pass before its weights pass, fc6 (6, 7) to fc2 (14, 15), and fc1's weights pass
// (16). A linear layer's weights pass reads its input; its data pass does not. fc6, the output,
// is kept (the logits).
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
  int id(const std::string& name) const {
    const auto& infos = g.tensor_infos();
    for (size_t t = 0; t < infos.size(); ++t)
      if (infos[t].name == name) return static_cast<int>(t);
    ADD_FAILURE() << "no tensor " << name;
    return -1;
  }
  std::vector<std::string> names(const std::vector<int>& ids) const {
    std::vector<std::string> out;
    for (int t : ids) out.push_back(g.tensor_infos()[t].name);
    return out;
  }
  // "swap_out fc1", "forward fc2", ... for each pass.
  std::vector<std::string> listing(const Schedule& s) const {
    std::vector<std::string> out;
    for (const Step& step : s.steps)
      out.push_back(std::string(step_name(step)) + " " + g.nodes()[step.node].name);
    return out;
  }
};

// fc1..fc5 are each read again after forward, by the next layer's weights pass; fc6 is kept.
// fc5 is last used by fc6's forward (5) and read again by fc6's weights pass (7): its copy out
// would overlap fc6's data pass (6) and its copy in nothing, so no pass would run without its
// bytes. All are 512 bytes: table order breaks the ties.
TEST(SwapCandidates, ActivationsReadAgainAfterForwardWithPassesBetween) {
  const Chain c;
  EXPECT_EQ(c.names(swap_candidates(c.g.step_schedule(), c.g.tensor_infos(), c.kept())),
            (std::vector<std::string>{"fc1", "fc2", "fc3", "fc4"}));
}

// Recomputation every 2 passes drops fc1 and fc3 and computes them again before backward: their
// first access after forward is that write, so they are not candidates; the checkpoints fc2 and
// fc4 are (fc5, as above, has no pass to spare).
TEST(SwapCandidates, NotWhatRecomputationWritesAgain) {
  const Chain c;
  const Schedule s = recompute_schedule(c.g.step_schedule(), c.g.tensor_infos(),
                                        *parse_recompute("every:2"), c.kept());
  EXPECT_EQ(c.names(swap_candidates(s, c.g.tensor_infos(), c.kept())),
            (std::vector<std::string>{"fc2", "fc4"}));
  const SwappedSchedule swapped = swap_schedule(s, c.g.tensor_infos(), {c.id("fc2"), c.id("fc4")});
  const std::vector<TensorInfo> table = with_host_copies(c.g.tensor_infos(), swapped.host_copies);
  EXPECT_TRUE(
      check_swaps(swapped.schedule, table, reuse_plan(swapped.schedule, table, c.kept())).empty());
}

TEST(SwapNames, UnknownOrUnswappableNamesAreRefusedWithTheReason) {
  const Chain c;
  const Schedule s = c.g.step_schedule();
  auto refused = [&](const char* list) -> std::string {
    try {
      named_swaps(*parse_swap(list), s, c.g.tensor_infos(), c.kept());
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "(accepted)";
  };
  EXPECT_NE(refused("fc9").find("no tensor named 'fc9'"), std::string::npos) << refused("fc9");
  EXPECT_NE(refused("fc9").find("fc1, fc2"), std::string::npos) << "it names some that can";
  EXPECT_NE(refused("fc6").find("read after the step"), std::string::npos) << refused("fc6");
  EXPECT_NE(refused("fc5").find("too few passes"), std::string::npos) << refused("fc5");
  EXPECT_NE(refused("fc1.weight").find("param tensor"), std::string::npos) << refused("fc1.weight");
  EXPECT_NE(refused("grad of fc2").find("activation_grad"), std::string::npos);
  EXPECT_EQ(c.names(named_swaps(*parse_swap("fc3,fc1"), s, c.g.tensor_infos(), c.kept())),
            (std::vector<std::string>{"fc3", "fc1"}));
}

// fc1 is last used in forward by fc2's forward pass (1) and next read by fc2's weights pass
// (15). Its copy out goes right after pass 1 and overlaps fc3's forward, after which its wait
// frees its device bytes; its copy in goes before fc2's data pass (14, the compute pass before
// 15), and its wait before 15.
TEST(SwapSchedule, CopiesOverlapOneComputePassEachWay) {
  const Chain c;
  const SwappedSchedule s = swap_schedule(c.g.step_schedule(), c.g.tensor_infos(), {c.id("fc1")});
  ASSERT_EQ(s.host_copies.size(), 1u);
  EXPECT_EQ(s.host_copies[0].name, "fc1 (host copy)");
  EXPECT_EQ(s.host_copies[0].kind, TensorKind::kSwapped);
  EXPECT_EQ(s.host_copies[0].category, MemCategory::kHostSwap);
  EXPECT_EQ(c.listing(s.schedule),
            (std::vector<std::string>{
                "forward fc1",          "forward fc2",          "swap_out fc1",
                "forward fc3",          "swap_wait fc1",        "forward fc4",
                "forward fc5",          "forward fc6",          "backward_data fc6",
                "backward_weights fc6", "backward_data fc5",    "backward_weights fc5",
                "backward_data fc4",    "backward_weights fc4", "backward_data fc3",
                "backward_weights fc3", "swap_in fc1",          "backward_data fc2",
                "swap_wait fc1",        "backward_weights fc2", "backward_weights fc1"}));
  const std::vector<TensorInfo> table = with_host_copies(c.g.tensor_infos(), s.host_copies);
  // The graph's step alone reads the output's gradient before any pass writes it (the trainer's
  // loss pass does): that finding, and no other.
  const std::vector<std::string> findings = check_schedule(s.schedule, table);
  EXPECT_EQ(findings.size(), 2u);
  for (const std::string& f : findings)
    EXPECT_NE(f.find("reads grad of fc6 "), std::string::npos) << f;
  const std::vector<Lifetime> life = lifetimes(s.schedule, table, c.kept());
  // Device bytes: written at 0, read by fc2 (1), the copy out (2) and its wait (4); written
  // again by the copy in (16), read by its wait (18) and fc2's weights pass (19).
  EXPECT_EQ(life[c.id("fc1")].spans, (std::vector<std::pair<size_t, size_t>>{{0, 4}, {16, 19}}));
  // The host copy: from the copy out (2) to the wait after the copy in (18).
  EXPECT_EQ(life[table.size() - 1].spans, (std::vector<std::pair<size_t, size_t>>{{2, 18}}));
  EXPECT_TRUE(check_swaps(s.schedule, table, reuse_plan(s.schedule, table, c.kept())).empty());
}

// The reuse plan's activation bytes (the arena, and the 1024 bytes held whole: fc6, kept, and
// its gradient, which the loss writes), as activations are swapped, largest first (all tie, so
// fc1 first). Without swapping (recompute_test.cpp): 3072 + 1024 = 4096, the arena's 6 slots
// live at fc6's data pass (fc1..fc5 and the gradient of fc5). Each of fc1, fc2, fc3 swapped
// takes its slot out of that pass (it is in host memory from the wait after the pass after its
// last forward use to its copy in before the weights pass that reads it): 3584, 3072, 2560. A
// layer's backward still holds three at once (its input, back from host memory, its output's
// gradient and its input's gradient), so fc4 swapped as well leaves 2560. The host copies take
// 512 bytes each: they all live at fc6's data pass.
TEST(SwapFigures, EachSwappedActivationTakesItsSlotOutOfThePeak) {
  const Chain c;
  const Schedule base = c.g.step_schedule();
  const auto act = static_cast<size_t>(MemCategory::kActivations);
  const auto host = static_cast<size_t>(MemCategory::kHostSwap);
  const std::pair<const char*, size_t> cases[] = {
      {"fc1", 3584}, {"fc1,fc2", 3072}, {"fc1,fc2,fc3", 2560}, {"fc1,fc2,fc3,fc4", 2560}};
  const size_t none = plan_peaks(reuse_plan(base, c.g.tensor_infos(), c.kept())).total;
  for (const auto& [list, activations] : cases) {
    const std::vector<int> ids = named_swaps(*parse_swap(list), base, c.g.tensor_infos(), c.kept());
    const SwappedSchedule s = swap_schedule(base, c.g.tensor_infos(), ids);
    const std::vector<TensorInfo> table = with_host_copies(c.g.tensor_infos(), s.host_copies);
    const MemoryPlan plan = reuse_plan(s.schedule, table, c.kept());
    const PlanPeaks peaks = plan_peaks(plan);
    EXPECT_EQ(peaks.by_category[act], activations) << list;
    EXPECT_EQ(peaks.by_category[host], 512 * ids.size()) << list;
    // The device total falls by what the activations do; host memory is not in it.
    EXPECT_EQ(none - peaks.total, 4096 - activations) << list;
    EXPECT_TRUE(check_swaps(s.schedule, table, plan).empty()) << list;
  }
}

// auto: the fewest candidates, largest first, whose plan's device buffers fit the budget (each
// swap, as above, takes 512 bytes off the activation arena, to a floor 1536 bytes under none).
TEST(SwapAuto, SwapsTheLargestUntilThePlanFits) {
  const Chain c;
  const Schedule base = c.g.step_schedule();
  const auto& infos = c.g.tensor_infos();
  const size_t none = reuse_plan(base, infos, c.kept()).device_bytes();
  EXPECT_TRUE(auto_swaps(base, infos, none, c.kept()).empty());
  EXPECT_EQ(c.names(auto_swaps(base, infos, none - 1, c.kept())),
            (std::vector<std::string>{"fc1"}));
  EXPECT_EQ(c.names(auto_swaps(base, infos, none - 1024, c.kept())),
            (std::vector<std::string>{"fc1", "fc2"}));
  // Out of reach (the floor is 1536 bytes under none): every candidate.
  EXPECT_EQ(auto_swaps(base, infos, none - 2048, c.kept()).size(), 4u);
}

// A copy out whose wait is gone: the planner gave fc1's bytes to fc4 from the wait on, so fc4's
// forward now writes them while the copy may still be reading them.
TEST(SwapCheck, FindsACopyThatRacesAPass) {
  const Chain c;
  const Schedule base = c.g.step_schedule();
  SwappedSchedule s = swap_schedule(base, c.g.tensor_infos(), {c.id("fc1"), c.id("fc2")});
  const std::vector<TensorInfo> table = with_host_copies(c.g.tensor_infos(), s.host_copies);
  const MemoryPlan plan = reuse_plan(s.schedule, table, c.kept());
  ASSERT_TRUE(check_swaps(s.schedule, table, plan).empty());
  auto& steps = s.schedule.steps;
  const auto out_wait = std::find_if(steps.begin(), steps.end(), [&](const Step& step) {
    return step.pass == Pass::kSwapWait && step.y == c.id("fc1");
  });
  ASSERT_NE(out_wait, steps.end());
  steps.erase(out_wait);
  const std::vector<std::string> races = check_swaps(s.schedule, table, plan);
  ASSERT_FALSE(races.empty());
  EXPECT_NE(races.front().find("swap_out fc1 may still be running"), std::string::npos)
      << races.front();
  // No wait at all after a copy.
  steps.erase(std::remove_if(steps.begin(), steps.end(),
                             [](const Step& step) { return step.pass == Pass::kSwapWait; }),
              steps.end());
  bool unwaited = false;
  for (const std::string& r : check_swaps(s.schedule, table, plan))
    unwaited |= r.find("has no wait after it") != std::string::npos;
  EXPECT_TRUE(unwaited);
}

}  // namespace
}  // namespace dlb
