// What the simulator charges each pass of a step (runtime/sim/calibration.h), on the replay
// tests' step (fc1 -> relu -> fc2, fc2's 36 parameters in bucket 0 and fc1's 72 in bucket 1): a
// layer pass its calibrated time, an update its bucket's share of the optimizer's, a stale slot's
// reduction the whole buffer's, a copy (stash, pull, push) 2/5 of the optimizer's, and
// asynchronous SGD's server the optimizer's time per push and its links' time per transfer.
#include <gtest/gtest.h>

#include "runtime/core/error.h"
#include "runtime/sim/calibration.h"
#include "tests/unit/fc_step.h"

namespace dlb {
namespace {

class CalibratedCost : public ::testing::Test, protected FcStep {
 protected:
  CalibratedCost() {
    c.model = "fc";
    c.precision = "fp32";
    c.backend = "cpu";
    c.device = "cpu";
    c.batch = 2;
    c.scale = 2;           // every profiled millisecond is 2,000 simulated microseconds
    c.optimizer_ms = 0.3;  // 600 us
    c.loss_ms = 0.005;
    c.layers = {{"fc1", 0.01, 0.02, 0.03, 0, 0},
                {"relu", 0.001, 0.002, 0, 0, 0},
                {"fc2", 0.004, 0.005, 0.006, 0, 0}};
    net.node = {"node", 2, 100};  // 100 GB/s: 1e5 bytes a microsecond
    net.net = {"nic", 10, 10};
    net.gpus_per_node = 8;
    net.algorithms = {Collective::kRing};
  }
  // The cost of each sync pass `p` of `s`, in order.
  std::vector<double> sync_costs(const Schedule& s, SyncPass p, int64_t ranks = 2) {
    const PassCost cost = calibrated_cost(c, g, plan, net, ranks);
    std::vector<double> out;
    for (const Step& step : s.steps) {
      if (step.pass == Pass::kSync && sync_pass_of(step) == p) out.push_back(cost(step));
    }
    return out;
  }

  // The flat gradient buffer's bytes (fp32, the parameters aligned within it).
  double buffer_bytes() const {
    return 4.0 * static_cast<double>(g.tensor_infos()[g.flat_gradient_id()].shape.numel());
  }

  Calibration c;
  Network net;
};

TEST_F(CalibratedCost, LayersTakeTheirTimesAndUpdatesTheirBucketsShare) {
  const Schedule s = schedule(OverlapStrategy::kBackward);
  const PassCost cost = calibrated_cost(c, g, plan, net, 2);
  int checked = 0;
  for (const Step& step : s.steps) {
    if (step.pass == Pass::kForward && g.nodes()[step.node].name == "fc1") {
      EXPECT_DOUBLE_EQ(cost(step), 20);
      ++checked;
    }
    if (step.pass == Pass::kLoss) {
      EXPECT_DOUBLE_EQ(cost(step), 10);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2);
  EXPECT_EQ(sync_costs(s, SyncPass::kUpdate), (std::vector<double>{200, 400}));
  const std::vector<double> reductions = sync_costs(s, SyncPass::kAllReduce);
  ASSERT_EQ(reductions.size(), 2u);
  // A bucket's slice of the flat buffer, its parameters' alignment padding included.
  EXPECT_DOUBLE_EQ(reductions[0], fastest_allreduce(net, 4.0 * plan.buckets[0].count, 2).us);
  EXPECT_DOUBLE_EQ(reductions[1], fastest_allreduce(net, 4.0 * plan.buckets[1].count, 2).us);
  EXPECT_EQ(sync_costs(schedule(OverlapStrategy::kNone), SyncPass::kUpdate),
            (std::vector<double>{200, 400}));
}

TEST_F(CalibratedCost, AStaleStepReducesItsWholeSlotUpdatesEverythingAndStashesAtTwoFifths) {
  const Schedule s = schedule(OverlapStrategy::kNone, true, 2);
  EXPECT_EQ(sync_costs(s, SyncPass::kAllReduce, 64),
            (std::vector<double>{fastest_allreduce(net, buffer_bytes(), 64).us}));
  EXPECT_EQ(sync_costs(s, SyncPass::kUpdateStale), (std::vector<double>{600}));
  EXPECT_EQ(sync_costs(s, SyncPass::kStash), (std::vector<double>{240}));
  EXPECT_EQ(sync_costs(s, SyncPass::kWait), (std::vector<double>{0}));
}

TEST_F(CalibratedCost, AsyncCopiesAtTwoFifthsAndItsServerAppliesAndTransfersOverItsLinks) {
  const Schedule s = schedule(OverlapStrategy::kNone, true, 0, true);
  EXPECT_EQ(sync_costs(s, SyncPass::kPull), (std::vector<double>{240}));
  EXPECT_EQ(sync_costs(s, SyncPass::kPush), (std::vector<double>{240}));
  const ServerCosts server = server_costs(c, g, net);
  EXPECT_DOUBLE_EQ(server.apply_us, 600);
  EXPECT_DOUBLE_EQ(server.reply_copy_us, 240);
  // The flat buffer: over the node's link to a rank of rank 0's node, over one NIC to any other.
  EXPECT_DOUBLE_EQ(server.transfer_us(7), 2 + buffer_bytes() / 1e5);
  EXPECT_DOUBLE_EQ(server.transfer_us(8), 10 + buffer_bytes() / 1e4);
  c.backend = "cuda";
  EXPECT_THROW(server_costs(c, g, net), Unsupported);
}

}  // namespace
}  // namespace dlb
