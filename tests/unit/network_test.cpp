// The collective models of runtime/sim/network.h, against their formulas worked by hand, and the
// shipped presets (suites/networks/*.json), which must parse and cite their sources.
#include "runtime/sim/network.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "runtime/core/error.h"
#include "suites/harness/core/source_dir.h"

namespace dlb {
namespace {

// 8 GPUs a node on 100 GB/s links with 1 us steps; one 12.5 GB/s NIC per node with 10 us steps.
Network server() {
  Network n;
  n.name = "test";
  n.gpus_per_node = 8;
  n.nics_per_node = 1;
  n.node = {"nvlink", 1.0, 100.0};
  n.net = {"ethernet", 10.0, 12.5};
  n.tree_bandwidth_factor = 0.5;
  n.algorithms = {Collective::kRing, Collective::kTree, Collective::kHierarchical};
  n.sources = {"by hand"};
  return n;
}

constexpr double kMB100 = 100e6;

TEST(Network, OneRankReducesNothing) {
  for (Collective c : kCollectives) EXPECT_EQ(allreduce_us(server(), c, kMB100, 1), 0);
}

TEST(Network, RingWithinANodeIsItsAlphaBetaFormula) {
  // 2 ranks: 2 steps of 1 us, and 2(2-1)/2 * 100 MB at 100 GB/s = 1000 us.
  EXPECT_DOUBLE_EQ(allreduce_us(server(), Collective::kRing, kMB100, 2), 2 + 1000);
  // 8 ranks: 14 steps, and 14/8 * 100 MB at 100 GB/s = 1750 us.
  EXPECT_DOUBLE_EQ(allreduce_us(server(), Collective::kRing, kMB100, 8), 14 + 1750);
  // Within one node the hierarchical scheme is the ring.
  EXPECT_DOUBLE_EQ(allreduce_us(server(), Collective::kHierarchical, kMB100, 8), 14 + 1750);
}

TEST(Network, RingAcrossNodesCrossesTheNetworkOncePerNode) {
  // 16 ranks on 2 nodes: the ring's 16 hops are 14 within a node (1 us) and 2 across (10 us),
  // 2(16-1)/16 = 1.875 times over: 63.75 us; each node's crossing carries 1.875 * 100 MB through
  // its 12.5 GB/s NIC: 15000 us.
  EXPECT_DOUBLE_EQ(allreduce_us(server(), Collective::kRing, kMB100, 16), 63.75 + 15000);
}

TEST(Network, HierarchicalCrossesTheNetworkWithAnEighthOfTheData) {
  // Within the node, the 8-rank ring (14 + 1750 us); across the 2 nodes, each GPU's 2-rank ring
  // of 12.5 MB over its eighth of the NIC: 2 * 10 + 12.5 MB / 1.5625 GB/s = 20 + 8000 us.
  EXPECT_DOUBLE_EQ(allreduce_us(server(), Collective::kHierarchical, kMB100, 16),
                   14 + 1750 + 20 + 8000);
}

TEST(Network, HalvingDoublingCrossesTheNetworkInLog2Steps) {
  // 32 ranks on 4 nodes: within the node a reduce and a broadcast, the 8-rank ring's steps and
  // bytes (14 + 1750 us); across the 4 nodes, 2 log2(4) = 4 steps of 10 us and 2(4-1)/4 of
  // 100 MB through the 12.5 GB/s NIC: 40 + 12000 us.
  EXPECT_DOUBLE_EQ(allreduce_us(server(), Collective::kHalvingDoubling, kMB100, 32),
                   14 + 1750 + 40 + 12000);
  // 3 nodes: 2 of them halve and double (2 steps, 100 MB at 12.5 GB/s), the third folds its
  // buffer into one of them first and gets the result back (2 steps, 200 MB).
  EXPECT_DOUBLE_EQ(allreduce_us(server(), Collective::kHalvingDoubling, kMB100, 24),
                   14 + 1750 + 20 + 8000 + 20 + 16000);
  // Within one node it is the ring.
  EXPECT_DOUBLE_EQ(allreduce_us(server(), Collective::kHalvingDoubling, kMB100, 8), 14 + 1750);
}

TEST(Network, TreeHasLogarithmicLatencyAndItsBandwidthFactor) {
  // 64 ranks on 8 nodes: depth 3 across nodes and a chain of 8 within:
  // 2 (3 * 10 + 7 * 1) = 74 us; 2 * 63/64 * 1 MB / (0.5 * 12.5 GB/s) = 315 us.
  EXPECT_NEAR(allreduce_us(server(), Collective::kTree, 1e6, 64), 74 + 315, 1e-9);
}

TEST(Network, TheTunerTakesTheFastestAlgorithmForEachSize) {
  Network n = server();
  // 1 MB over 8 nodes: the hierarchical scheme crosses the network in 2(8-1) steps, not the
  // ring's 2(64-1) hops, 16 of them slow.
  EXPECT_EQ(fastest_allreduce(n, 1e6, 64).algorithm, Collective::kHierarchical);
  // Tiny messages at many ranks: the tree's log2 latency beats 2(n-1) ring steps.
  n.algorithms = {Collective::kRing, Collective::kTree};
  EXPECT_EQ(fastest_allreduce(n, 8, 1024).algorithm, Collective::kTree);
  // Large messages: the ring's full bandwidth beats the tree's half.
  EXPECT_EQ(fastest_allreduce(n, kMB100, 1024).algorithm, Collective::kRing);
  EXPECT_DOUBLE_EQ(fastest_allreduce(n, kMB100, 1024).us,
                   allreduce_us(n, Collective::kRing, kMB100, 1024));
}

std::string parse_error(const nlohmann::json& j) {
  try {
    parse_network(j, "net.json");
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(Network, APresetRoundTripsAndBadFieldsAreNamed) {
  const nlohmann::json good = network_json(server());
  EXPECT_EQ(network_json(parse_network(good, "net.json")), good);
  nlohmann::json j = good;
  j.erase("gpus_per_node");
  EXPECT_NE(parse_error(j).find("gpus_per_node"), std::string::npos) << parse_error(j);
  j = good;
  j["net"]["latency_us"] = -1;
  EXPECT_NE(parse_error(j).find("latency_us"), std::string::npos) << parse_error(j);
  j = good;
  j["node"]["bandwidth_gbs"] = 0;
  EXPECT_NE(parse_error(j).find("bandwidth_gbs"), std::string::npos) << parse_error(j);
  j = good;
  j["algorithms"] = {"ring", "butterfly"};
  EXPECT_NE(parse_error(j).find("algorithms[1]"), std::string::npos) << parse_error(j);
  j = good;
  j["sources"] = nlohmann::json::array();
  EXPECT_NE(parse_error(j).find("sources"), std::string::npos) << parse_error(j);
  j = good;
  j["tree_bandwidth_factor"] = 1.5;
  EXPECT_NE(parse_error(j).find("tree_bandwidth_factor"), std::string::npos) << parse_error(j);
  j = good;
  j["device"] = "";
  EXPECT_NE(parse_error(j).find("device"), std::string::npos) << parse_error(j);
  j["device"] = "h100-sxm";  // the device its nodes hold, kept through a record
  EXPECT_EQ(network_json(parse_network(j, "net.json")), j);
  j["comm_blocks_compute"] = 0.4;  // a host's measured network: kept, or a re-run overlaps free
  EXPECT_EQ(network_json(parse_network(j, "net.json")), j);
  j["comm_blocks_compute"] = true;  // as older files wrote it: all of the reduction's time
  EXPECT_EQ(parse_network(j, "net.json").comm_blocks_compute, 1);
  j["comm_blocks_compute"] = 1.5;  // beside the work, the reduction slows it by more than its time
  EXPECT_EQ(parse_network(j, "net.json").comm_blocks_compute, 1.5);
  j["comm_blocks_compute"] = kMaxBlocksCompute * 2;
  EXPECT_NE(parse_error(j).find("comm_blocks_compute"), std::string::npos) << parse_error(j);
  j["comm_blocks_compute"] = 1;
  j["comm_stretch"] = 0.5;  // a reduction faster beside compute than alone
  EXPECT_NE(parse_error(j).find("comm_stretch"), std::string::npos) << parse_error(j);
  j.erase("comm_stretch");
  j["comm_blocks_compute"] = "yes";
  EXPECT_NE(parse_error(j).find("comm_blocks_compute"), std::string::npos) << parse_error(j);
}

TEST(Network, EveryShippedPresetParses) {
  int presets = 0;
  for (const auto& f : std::filesystem::directory_iterator(source_dir() + "/suites/networks")) {
    if (f.path().extension() != ".json") continue;
    std::ifstream in(f.path());
    const Network n = parse_network(nlohmann::json::parse(in), f.path().string());
    EXPECT_EQ(n.name, f.path().stem().string()) << "a preset is named as its file";
    if (!n.device.empty()) {  // a device file of that name exists, for the roofline
      EXPECT_TRUE(std::filesystem::exists(source_dir() + "/suites/devices/" + n.device + ".json"))
          << n.name << ": " << n.device;
    }
    ++presets;
  }
  EXPECT_GE(presets, 4);
}

// A bench record of `ranks` ranks whose all-reduce times follow a ring of alpha `alpha_us` and
// `gbs` GB/s exactly.
nlohmann::json ring_bench(int64_t ranks, double alpha_us, double gbs) {
  nlohmann::json rows = nlohmann::json::array();
  const double n = static_cast<double>(ranks);
  for (double bytes : {4e3, 4e5, 4e7}) {
    const double us = 2 * (n - 1) * alpha_us + 2 * (n - 1) / n * bytes / (gbs * 1e9) * 1e6;
    rows.push_back({{"bytes", bytes}, {"time_s", us * 1e-6}, {"wrong", 0}});
  }
  return {{"kind", "bench_allreduce"},
          {"ranks", ranks},
          {"rows", rows},
          {"environment", {{"host", "h"}, {"time", "t"}, {"mpi", "m"}}}};
}

TEST(Network, TheBenchFitRecoversARingsAlphaAndBeta) {
  const Network n = network_from_bench({ring_bench(2, 3.0, 5.0), ring_bench(4, 3.0, 5.0)},
                                       {"two.json", "four.json"}, 8);
  EXPECT_NEAR(n.node.latency_us, 3.0, 1e-9);
  EXPECT_NEAR(n.node.bandwidth_gbs, 5.0, 1e-9);
  EXPECT_EQ(n.gpus_per_node, 8);
  ASSERT_EQ(n.measured.size(), 2u);
  // A rank count not measured comes from the fit: 8 ranks, 40 MB.
  const double bytes = 4e7;
  EXPECT_NEAR(allreduce_us(n, Collective::kRing, bytes, 8),
              14 * 3.0 + 2.0 * 7 / 8 * bytes / 5e9 * 1e6, 1e-6);
}

// Host work lost beside the all-reduces, where the bench measured it: each rank count's work lost
// and reductions' time beside it over their time alone (the rows' sums); their means for the
// rank counts not measured; kept through the JSON.
TEST(Network, TheBenchsBlockedComputeIsEachRankCountsWorkLostOverItsReductionsTime) {
  nlohmann::json two = ring_bench(2, 3.0, 5.0), four = ring_bench(4, 3.0, 5.0);
  // Row 0 from before the medians were kept (its share alone); rows 1 and 2 from the medians,
  // row 2's work slower beside the reduction than its time (lost 1.5 x), row 1's faster (noise).
  double lost = 0, beside = 0, total = 0;
  for (size_t i = 0; i < 3; ++i) {
    const double t = two["rows"][i]["time_s"].get<double>();
    const double alone = 0.01, lost_s[] = {0.8 * t, -0.1 * t, 1.5 * t};
    two["rows"][i]["beside_compute"] = {{"blocks_compute", std::max(lost_s[i] / t, 0.0)},
                                        {"allreduce_beside_s", 2 * t}};
    if (i > 0) {
      two["rows"][i]["beside_compute"]["work_alone_s"] = alone;
      two["rows"][i]["beside_compute"]["work_beside_s"] = alone + lost_s[i];
    }
    lost += lost_s[i];
    beside += 2 * t;
    total += t;
  }
  const Network n = network_from_bench({two, four}, {"two.json", "four.json"}, 8);
  ASSERT_TRUE(n.measured[0].blocks_compute.has_value());
  EXPECT_NEAR(*n.measured[0].blocks_compute, lost / total, 1e-12);
  EXPECT_NEAR(*n.measured[0].stretch, beside / total, 1e-12);
  EXPECT_FALSE(n.measured[1].blocks_compute.has_value());          // four's rows did not measure it
  EXPECT_NEAR(core_sharing(n, 4, 1e6).lost, lost / total, 1e-12);  // the mean of those measured
  EXPECT_NEAR(core_sharing(n, 64, 1e6).lost, lost / total, 1e-12);
  EXPECT_NEAR(core_sharing(n, 64, 1e6).stretch, 2, 1e-12);
  // At two ranks, each size's own (its rows are 100x apart): row 1's lost is below 0, as 0.
  EXPECT_NEAR(core_sharing(n, 2, 4e3).lost, 0.8, 1e-9);
  EXPECT_NEAR(core_sharing(n, 2, 4e5).lost, 0, 1e-9);
  EXPECT_NEAR(core_sharing(n, 2, 3e7).lost, 1.5, 1e-9);
  EXPECT_NEAR(core_sharing(n, 2, 3e7).stretch, 2, 1e-9);
  const Network back = parse_network(network_json(n), "network.json");
  EXPECT_EQ(back.measured[0].blocks_compute, n.measured[0].blocks_compute);
  EXPECT_EQ(core_sharing(back, 2, 4e3).lost, core_sharing(n, 2, 4e3).lost);
  EXPECT_EQ(back.measured[0].stretch, n.measured[0].stretch);
  EXPECT_EQ(back.comm_blocks_compute, n.comm_blocks_compute);
  EXPECT_EQ(back.comm_stretch, n.comm_stretch);
  // No row measured: a rank computes nothing while its reduction runs, assumed and cited so.
  const Network old = network_from_bench({ring_bench(2, 3.0, 5.0)}, {"two.json"}, 8);
  EXPECT_EQ(old.comm_blocks_compute, 1);
  EXPECT_EQ(old.comm_stretch, 1);
  EXPECT_NE(old.sources.back().find("assumed"), std::string::npos) << old.sources.back();
  two["rows"][0]["beside_compute"]["blocks_compute"] = kMaxBlocksCompute * 2;
  EXPECT_THROW(network_from_bench({two}, {"two.json"}, 8), InvalidArgument);
}

// A size's sharing: the measured points from half to twice it, their sums over their times alone;
// the nearest where none is that close.
TEST(Network, AReductionsSharingIsItsNeighbouringSizesSums) {
  MeasuredAllreduce m;
  m.points = {{1e6, 100}, {2e6, 200}, {4e6, 400}, {64e6, 6400}};
  m.beside = {MeasuredAllreduce::Beside{50, 150}, MeasuredAllreduce::Beside{300, 500}, std::nullopt,
              MeasuredAllreduce::Beside{6400, 12800}};
  const CoreSharing at_2m = *m.sharing_at(2e6);  // 1e6 and 2e6 (4e6 not measured)
  EXPECT_NEAR(at_2m.lost, 350.0 / 300, 1e-12);
  EXPECT_NEAR(at_2m.stretch, 650.0 / 300, 1e-12);
  EXPECT_NEAR(m.sharing_at(8e6)->lost, 1.5, 1e-12);  // 2e6 and 64e6 are 4x and 8x away: 2e6
  EXPECT_NEAR(m.sharing_at(8e6)->stretch, 2.5, 1e-12);
  EXPECT_NEAR(m.sharing_at(40e6)->lost, 1.0, 1e-12);  // 64e6, within 2x
  EXPECT_NEAR(m.sharing_at(1e3)->lost, 0.5, 1e-12);   // below every point: the smallest
  m.beside.assign(4, std::nullopt);
  EXPECT_FALSE(m.sharing_at(2e6).has_value());
}

TEST(Network, ABenchWhoseTimesDoNotGrowIsRefused) {
  nlohmann::json flat = ring_bench(2, 3.0, 5.0);
  double t = 1e-3;
  for (auto& row : flat["rows"]) row["time_s"] = t -= 1e-4;  // falling with size
  EXPECT_THROW(network_from_bench({flat}, {"flat.json"}, 8), InvalidArgument);
  nlohmann::json unsorted = ring_bench(2, 3.0, 5.0);
  std::swap(unsorted["rows"][0], unsorted["rows"][1]);
  EXPECT_THROW(network_from_bench({unsorted}, {"unsorted.json"}, 8), InvalidArgument);
  EXPECT_THROW(network_from_bench({ring_bench(2, 3, 5), ring_bench(2, 3, 5)}, {"a", "b"}, 8),
               InvalidArgument);
}

}  // namespace
}  // namespace dlb
