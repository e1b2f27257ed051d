// A network for the what-if simulator (docs/simulation.md): how long an all-reduce of S bytes
// takes over n GPUs, from alpha-beta models of the collective algorithms. A preset
// (suites/networks/*.json) gives each level's per-step latency (alpha) and the bandwidth one
// GPU's share of it carries (beta, bytes/s), and cites where each figure comes from.
//
// With g GPUs per node, m = ceil(n / g) nodes, and S bytes (nccl-tests' bus bandwidth is the
// 2(n-1)/n factor's beta):
//   ring:         2(n-1)/n ((n-m) alpha_node + m alpha_net) + 2(n-1)/n S / beta: a ring crosses
//                 the network m times and NVLink (or PCIe) n-m times; every GPU sends 2(n-1)/n S.
//                 Within one node (m = 1) every hop is the node's: 2(n-1) alpha_node.
//                 Across nodes, each node's crossing carries that much through its NICs (NCCL
//                 runs a ring per NIC), so beta is the smaller of the node's link and its NICs'
//                 sum; within one node, the node's link.
//   tree:         NCCL's double binary tree: across nodes a tree of depth ceil(log2 m), within a
//                 node a chain of g GPUs; a reduce up and a broadcast down, so
//                 2 (ceil(log2 m) alpha_net + (g-1) alpha_node) + 2(n-1)/n S / (f_tree beta),
//                 with f_tree the preset's tree bandwidth factor (NCCL's tree reaches less of the
//                 link than its ring).
//   hierarchical: within the node a ring reduce-scatter, across nodes a ring all-reduce of each
//                 GPU's 1/g of the data over its 1/g of the NICs (g such rings at once), then an
//                 all-gather within the node: the 2D scheme of Mikami et al. (2018) and Horovod's
//                 hierarchical all-reduce.
//   halving-doubling: within the node a reduce into one buffer and, at the end, a broadcast from
//                 it (together a ring all-reduce's steps and bytes); across nodes the whole
//                 buffer's all-reduce by recursive halving (a reduce-scatter) and recursive
//                 doubling (an all-gather) over the node's NICs: 2 log2(m) alpha_net +
//                 2(m-1)/m S / beta_net (Thakur, Rabenseifner and Gropp 2005). Where m is not a
//                 power of two, the nodes beyond the largest power of two first fold their
//                 buffer into a partner and get the result back: 2 more steps, each of S. The
//                 three phases of Goyal et al. (2017), in Gloo.
// The algorithm used is the one with the least predicted time among the preset's `algorithms`:
// the rule of NCCL's tuner (its ncclTopoGetAlgoTime: latency + size / bandwidth per algorithm,
// the minimum taken).
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/core/core_sharing.h"

namespace dlb {

// The most ranks a network model (and the simulator) takes: 2^20.
inline constexpr int64_t kMaxSimulatedRanks = int64_t{1} << 20;

enum class Collective { kRing, kTree, kHierarchical, kHalvingDoubling, kMeasured };
inline constexpr Collective kCollectives[] = {
    Collective::kRing, Collective::kTree, Collective::kHierarchical, Collective::kHalvingDoubling};
const char* collective_name(Collective c);

struct Link {
  std::string name;          // "NVLink 4 (NVSwitch)", "InfiniBand NDR"
  double latency_us = 0;     // alpha: one step of a collective over this level
  double bandwidth_gbs = 0;  // GB/s (1e9 bytes): per GPU within a node; per NIC between nodes
};

// An all-reduce's measured time against its size at one rank count (`dlbench bench allreduce`):
// between two measured sizes the time is interpolated linearly; below the smallest it is the
// smallest's; above the largest it grows at the largest's bandwidth.
// Where the record measured them (bench allreduce's beside_compute), how its all-reduces share the
// cores that compute (runtime/core/core_sharing.h): per point, the host work lost beside it and
// its time beside that work; over all of them, `blocks_compute` and `stretch` (their sums over
// the points' times alone).
struct MeasuredAllreduce {
  struct Beside {
    double lost_us = 0, beside_us = 0;
  };
  int64_t ranks = 2;
  std::vector<std::pair<double, double>> points;  // (bytes, microseconds), bytes increasing
  std::vector<std::optional<Beside>> beside;      // one per point, or none
  std::optional<double> blocks_compute, stretch;
  double us(double bytes) const;
  // At `bytes`: the measured points from half to twice its size (the nearest where none is),
  // their sums over their times alone; none where no point was measured.
  std::optional<CoreSharing> sharing_at(double bytes) const;
};

struct Network {
  std::string name, description;
  std::vector<std::string> sources;
  int64_t gpus_per_node = 1;
  Link node;  // between GPUs of one node
  Link net;   // between nodes, through the node's NICs
  int64_t nics_per_node = 1;
  double tree_bandwidth_factor = 1;
  std::vector<Collective> algorithms;  // the ones the library may choose
  // How all-reduces share the cores that compute (runtime/core/core_sharing.h), for the rank
  // counts not measured: comm_blocks_compute its `lost` (in [0, kMaxBlocksCompute]), comm_stretch
  // its `stretch` (in [1, kMaxStretch]). 0 and 1 for GPUs, whose collectives have engines and
  // links of their own; on a host, the means of the measured rank counts' (network_from_bench).
  double comm_blocks_compute = 0, comm_stretch = 1;
  // Where present for a rank count, the measurement is the time (Collective::kMeasured), and the
  // models serve the other rank counts.
  std::vector<MeasuredAllreduce> measured;
  // The accelerator the network's nodes hold, as a device file's name (suites/devices/NAME.json),
  // or empty: a suite's simulate block calibrates from its roofline when its points ran on
  // another device (docs/simulation.md).
  std::string device;
};

// Between nodes, a node's NICs together (bytes/s).
double net_bytes_per_s(const Network& n);

// A preset from its JSON: InvalidArgument naming `where` and the field when one is missing,
// negative, zero where it divides, or unknown.
Network parse_network(const nlohmann::json& j, const std::string& where);
nlohmann::json network_json(const Network& n);

struct CollectiveTime {
  Collective algorithm = Collective::kRing;
  double us = 0;
};
// One algorithm's predicted time for an all-reduce of `bytes` over `ranks` GPUs (0 for one rank).
double allreduce_us(const Network& net, Collective algorithm, double bytes, int64_t ranks);
// The fastest of the network's algorithms, as its library's tuner would choose; the measured time
// where the network has one for `ranks`.
CollectiveTime fastest_allreduce(const Network& net, double bytes, int64_t ranks);

// How an all-reduce of `bytes` over `ranks` ranks shares the cores that compute: the measured rank
// count's at that size (MeasuredAllreduce::sharing_at), or over all its sizes, where it has them;
// else the network's.
CoreSharing core_sharing(const Network& net, int64_t ranks, double bytes);

// A host as a network, from `dlbench bench allreduce --json` records (one per rank count, each
// named by `where`): each rank count's measured times (used as they are), and a ring's alpha and
// beta fitted to all of them (least squares on relative error) for the rank counts not measured,
// and how its all-reduces share the cores: each record's compute lost over its rows' all-reduce
// time, and their time beside compute over it (ratios of the rows' sums; the network's, their
// means; 1 lost, assumed, where no row measured it).
// Every rank on one node, of at most `ranks_per_node` ranks (the most its launcher starts).
Network network_from_bench(const std::vector<nlohmann::json>& benches,
                           const std::vector<std::string>& where, int64_t ranks_per_node);

}  // namespace dlb
