// The small two-bucket step the replay and simulator tests replay: fc1 -> relu -> fc2, declared
// only (a replay runs no pass, so nothing is allocated and no backend is asked), with fc2's
// parameters in bucket 0 (reduced first) and fc1's in bucket 1, and round pass costs.
#pragma once
#include <memory>

#include "runtime/nn/graph.h"
#include "runtime/nn/layers/elementwise.h"
#include "runtime/nn/layers/linear.h"
#include "runtime/overlap/sync_schedule.h"

namespace dlb {

struct FcStep {
  FcStep() {
    g.add("fc1", std::make_unique<Linear>(8, 8), {g.input()});
    g.add("relu", std::make_unique<Relu>(), {g.output()});
    g.add("fc2", std::make_unique<Linear>(8, 4), {g.output()});
    g.declare(PrecisionPolicy{}, BackendTraits{});
    // Flat order is the last layer's first: fc2.weight, fc2.bias, fc1.weight, fc1.bias.
    // Each bucket from its first gradient to the end of its last, as make_bucket_plan lays it.
    const auto& at = g.grad_offsets();
    plan.buckets = {{0, 2, at[0], at[1] + 4 - at[0], 8 * 4 + 4},
                    {2, 2, at[2], at[3] + 8 - at[2], 8 * 8 + 8}};
    plan.bucket_of = {0, 0, 1, 1};
  }

  // Forward, the loss, backward, and `strategy`'s sync passes for several ranks (`distributed`)
  // or one; `staleness` K >= 1: bounded staleness's (with the strategy none); `async`:
  // asynchronous SGD's pull, progress passes and push (with the strategy none); `independent`:
  // independent ranks' meeting (with the strategy none).
  Schedule schedule(OverlapStrategy strategy, bool distributed = true, int64_t staleness = 0,
                    bool async = false, bool independent = false) {
    Schedule s = g.forward_schedule();
    Step loss;
    loss.pass = Pass::kLoss;
    loss.node = g.output();
    loss.reads = {g.output_id(g.output())};
    loss.writes = {g.grad_id(g.output())};
    s.steps.push_back(loss);
    const auto& bw = g.backward_schedule().steps;
    s.steps.insert(s.steps.end(), bw.begin(), bw.end());
    table = g.tensor_infos();
    insert_sync(
        s, table, g, plan,
        SyncOptions{strategy, distributed ? 2 : 1, false, staleness, async, 0, independent});
    return s;
  }

  // Forward 10 per layer, loss 5, each backward pass 20, a bucket's reduction 50 (the whole
  // buffer's 100), an update, a pull or a push 4, a progress pass 1.
  static double cost(const Step& s) {
    switch (s.pass) {
      case Pass::kForward:
        return 10;
      case Pass::kLoss:
        return 5;
      case Pass::kSync:
        switch (sync_pass_of(s)) {
          case SyncPass::kAllReduce:
            return s.arg < 0 ? 100 : 50;
          case SyncPass::kProgress:
            return 1;
          case SyncPass::kWait:
            return 0;
          default:
            return 4;
        }
      default:
        return 20;
    }
  }

  Graph g{Shape{2, 8}};
  BucketPlan plan;
  std::vector<TensorInfo> table;  // the last schedule's: the graph's, then its carried gradients
};

}  // namespace dlb
