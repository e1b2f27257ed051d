#include "runtime/sim/network.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include "runtime/core/allreduce_share.h"
#include "runtime/core/error.h"
#include "runtime/io/json_fields.h"

namespace dlb {

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::kRing:
      return "ring";
    case Collective::kTree:
      return "tree";
    case Collective::kHierarchical:
      return "hierarchical";
    case Collective::kHalvingDoubling:
      return "halving-doubling";
    case Collective::kMeasured:
      return "measured";
  }
  return "?";
}

double MeasuredAllreduce::us(double bytes) const {
  const auto& p = points;
  if (bytes <= p.front().first) return p.front().second;
  for (size_t i = 1; i < p.size(); ++i) {
    if (bytes <= p[i].first) {
      const double f = (bytes - p[i - 1].first) / (p[i].first - p[i - 1].first);
      return p[i - 1].second + f * (p[i].second - p[i - 1].second);
    }
  }
  return p.back().second * bytes / p.back().first;
}

std::optional<CoreSharing> MeasuredAllreduce::sharing_at(double bytes) const {
  double lost = 0, beside_us = 0, alone = 0, nearest = std::numeric_limits<double>::infinity();
  size_t nearest_at = 0;
  for (size_t i = 0; i < beside.size(); ++i) {
    if (!beside[i]) continue;
    const double distance = std::abs(std::log2(points[i].first / bytes));
    if (distance < nearest) {
      nearest = distance;
      nearest_at = i;
    }
    if (distance > 1) continue;
    lost += beside[i]->lost_us;
    beside_us += beside[i]->beside_us;
    alone += points[i].second;
  }
  if (std::isinf(nearest)) return std::nullopt;
  if (alone == 0) {  // none within a factor of two: the nearest
    lost = beside[nearest_at]->lost_us;
    beside_us = beside[nearest_at]->beside_us;
    alone = points[nearest_at].second;
  }
  return CoreSharing{std::clamp(lost / alone, 0.0, kMaxBlocksCompute),
                     beside_us > 0 ? std::clamp(beside_us / alone, 1.0, kMaxStretch) : 1.0};
}

namespace {

constexpr double kGB = 1e9;

// A link's figures within what any network has, so that every time the models derive from them
// is finite (a latency of 1e308 us, or a bandwidth of 5e-324, made infinite all-reduces): a
// latency of up to 1,000 s, a bandwidth of 1 KB/s to 1 PB/s.
Link parse_link(const JsonFields& f) {
  Link l;
  l.name = f.string("name");
  l.latency_us = f.number("latency_us", 0.0, 1e9);
  l.bandwidth_gbs = f.number("bandwidth_gbs", 1e-6, 1e6);
  return l;
}

MeasuredAllreduce parse_measured(const JsonFields& f) {
  MeasuredAllreduce m;
  m.ranks = f.integer("ranks", 2, 1 << 20);
  const nlohmann::json& points = f.array("points");
  for (size_t i = 0; i < points.size(); ++i) {
    const JsonFields p(points[i], f.element("points", i));
    const double bytes = p.number("bytes", 1, 1e15), us = p.number("us", 1e-6, 1e12);
    if (!m.points.empty() && bytes <= m.points.back().first) {
      p.fail("bytes", "sizes increasing from one point to the next");
    }
    m.points.emplace_back(bytes, us);
    m.beside.emplace_back();
    if (p.has("lost_us") || p.has("beside_us")) {
      // lost_us is negative where noise made the work beside the reduction faster than alone.
      m.beside.back() = MeasuredAllreduce::Beside{
          p.number("lost_us", -kMaxBlocksCompute * us, kMaxBlocksCompute * us),
          p.number("beside_us", 0, kMaxStretch * us)};
    }
  }
  if (m.points.empty()) f.fail("points", "at least one (bytes, us) point");
  if (f.has("blocks_compute")) m.blocks_compute = f.number("blocks_compute", 0, kMaxBlocksCompute);
  if (f.has("stretch")) m.stretch = f.number("stretch", 1, kMaxStretch);
  return m;
}

// A network's comm_blocks_compute: a number, or (as older files wrote it) true for 1.
double parse_blocks_compute(const JsonFields& f) {
  if (f.required("comm_blocks_compute").is_boolean()) {
    return f.boolean("comm_blocks_compute") ? 1 : 0;
  }
  return f.number("comm_blocks_compute", 0, kMaxBlocksCompute);
}

nlohmann::json link_json(const Link& l) {
  return {{"name", l.name}, {"latency_us", l.latency_us}, {"bandwidth_gbs", l.bandwidth_gbs}};
}

// A ring all-reduce over `n` ranks: 2(n-1) steps, each moving 1/n of the data.
double ring_us(double alpha_us, double bytes_per_s, double bytes, int64_t n) {
  if (n <= 1) return 0;
  const double steps = 2.0 * static_cast<double>(n - 1);
  return steps * alpha_us + allreduce_share(static_cast<double>(n)) * bytes / bytes_per_s * 1e6;
}

// Recursive halving then doubling over `n` ranks: 2 log2(n) steps moving 2(n-1)/n of the data
// between a power of two of them; the others fold in first and get the result last (2 steps of
// all the data).
double halving_doubling_us(double alpha_us, double bytes_per_s, double bytes, int64_t n) {
  if (n <= 1) return 0;
  int64_t p = 1, log2p = 0;
  while (p * 2 <= n) p *= 2, ++log2p;
  const auto pd = static_cast<double>(p);
  double us =
      2 * static_cast<double>(log2p) * alpha_us + allreduce_share(pd) * bytes / bytes_per_s * 1e6;
  if (p < n) us += 2 * alpha_us + 2 * bytes / bytes_per_s * 1e6;
  return us;
}

}  // namespace

double net_bytes_per_s(const Network& n) {
  return n.net.bandwidth_gbs * kGB * static_cast<double>(n.nics_per_node);
}

Network parse_network(const nlohmann::json& j, const std::string& where) {
  const JsonFields f(j, where);
  Network n;
  n.name = f.string("name");
  n.description = f.string("description");
  n.gpus_per_node = f.integer("gpus_per_node", 1, 1 << 20);
  n.nics_per_node = f.integer("nics_per_node", 1, 1 << 20);
  n.node = parse_link(f.object("node"));
  n.net = parse_link(f.object("net"));
  n.tree_bandwidth_factor = f.number("tree_bandwidth_factor", 0.0, 1.0);
  if (n.tree_bandwidth_factor <= 0) f.fail("tree_bandwidth_factor", "a factor in (0, 1]");
  const nlohmann::json& algorithms = f.array("algorithms");
  for (size_t i = 0; i < algorithms.size(); ++i) {
    const auto* name = algorithms[i].get_ptr<const std::string*>();
    const auto* known =
        std::find_if(std::begin(kCollectives), std::end(kCollectives),
                     [&](Collective c) { return name && *name == collective_name(c); });
    if (known == std::end(kCollectives)) {
      throw InvalidArgument(
          fmt::format("{}: expected ring, tree, hierarchical or halving-doubling, got {}",
                      f.element("algorithms", i), algorithms[i].dump()));
    }
    n.algorithms.push_back(*known);
  }
  if (n.algorithms.empty()) {
    f.fail("algorithms", "at least one of ring, tree, hierarchical, halving-doubling");
  }
  const nlohmann::json& sources = f.array("sources");
  for (size_t i = 0; i < sources.size(); ++i) {
    const auto* source = sources[i].get_ptr<const std::string*>();
    if (!source || source->empty()) {
      throw InvalidArgument(fmt::format("{}: expected a citation, got {}", f.element("sources", i),
                                        sources[i].dump()));
    }
    n.sources.push_back(*source);
  }
  if (n.sources.empty()) f.fail("sources", "at least one citation for the preset's figures");
  if (f.has("comm_blocks_compute")) n.comm_blocks_compute = parse_blocks_compute(f);
  if (f.has("comm_stretch")) n.comm_stretch = f.number("comm_stretch", 1, kMaxStretch);
  if (f.has("device")) {
    n.device = f.string("device");
    if (n.device.empty()) f.fail("device", "a device file's name (suites/devices/NAME.json)");
  }
  if (f.has("measured")) {
    const nlohmann::json& measured = f.array("measured");
    for (size_t i = 0; i < measured.size(); ++i) {
      n.measured.push_back(parse_measured(JsonFields(measured[i], f.element("measured", i))));
      for (size_t k = 0; k + 1 < n.measured.size(); ++k) {
        if (n.measured[k].ranks == n.measured.back().ranks) {
          throw InvalidArgument(fmt::format("{}: a second measurement at {} ranks",
                                            f.element("measured", i), n.measured.back().ranks));
        }
      }
    }
  }
  return n;
}

nlohmann::json network_json(const Network& n) {
  nlohmann::json algorithms = nlohmann::json::array();
  for (Collective c : n.algorithms) algorithms.push_back(collective_name(c));
  nlohmann::json j = {{"name", n.name},
                      {"description", n.description},
                      {"gpus_per_node", n.gpus_per_node},
                      {"nics_per_node", n.nics_per_node},
                      {"node", link_json(n.node)},
                      {"net", link_json(n.net)},
                      {"tree_bandwidth_factor", n.tree_bandwidth_factor},
                      {"algorithms", algorithms},
                      {"sources", n.sources}};
  if (!n.device.empty()) j["device"] = n.device;
  // (Written where not 0: a network read back from its JSON, validate-sim's network.json, must
  // block compute as the one it was made from; without it a re-run overlapped for free.)
  if (n.comm_blocks_compute > 0) j["comm_blocks_compute"] = n.comm_blocks_compute;
  if (n.comm_stretch != 1) j["comm_stretch"] = n.comm_stretch;
  if (!n.measured.empty()) {
    nlohmann::json measured = nlohmann::json::array();
    for (const MeasuredAllreduce& m : n.measured) {
      nlohmann::json points = nlohmann::json::array();
      for (size_t i = 0; i < m.points.size(); ++i) {
        points.push_back({{"bytes", m.points[i].first}, {"us", m.points[i].second}});
        if (i < m.beside.size() && m.beside[i]) {
          points.back()["lost_us"] = m.beside[i]->lost_us;
          points.back()["beside_us"] = m.beside[i]->beside_us;
        }
      }
      measured.push_back({{"ranks", m.ranks}, {"points", points}});
      if (m.blocks_compute) measured.back()["blocks_compute"] = *m.blocks_compute;
      if (m.stretch) measured.back()["stretch"] = *m.stretch;
    }
    j["measured"] = measured;
  }
  return j;
}

double allreduce_us(const Network& net, Collective algorithm, double bytes, int64_t ranks) {
  if (ranks <= 1) return 0;
  if (ranks > kMaxSimulatedRanks) {
    throw InvalidArgument(
        fmt::format("at most {} ranks are simulated, not {}", kMaxSimulatedRanks, ranks));
  }
  const int64_t g = std::min(net.gpus_per_node, ranks);  // GPUs of a node in the job
  const int64_t m = (ranks + g - 1) / g;                 // nodes
  const double node_bw = net.node.bandwidth_gbs * kGB;
  const double beta = m > 1 ? std::min(node_bw, net_bytes_per_s(net)) : node_bw;
  const double n = static_cast<double>(ranks);
  const double share = allreduce_share(n);  // of the data, each GPU sends (and receives)
  const double transfer_us = share * bytes / beta * 1e6;
  switch (algorithm) {
    case Collective::kRing: {
      const double hops = (n - static_cast<double>(m)) * net.node.latency_us +
                          static_cast<double>(m) * net.net.latency_us;
      return share * (m > 1 ? hops : n * net.node.latency_us) + transfer_us;
    }
    case Collective::kTree: {
      const double depth = std::ceil(std::log2(static_cast<double>(m)));
      const double latency =
          2 * (depth * net.net.latency_us + static_cast<double>(g - 1) * net.node.latency_us);
      return latency + transfer_us / net.tree_bandwidth_factor;
    }
    case Collective::kMeasured:
      for (const MeasuredAllreduce& m : net.measured) {
        if (m.ranks == ranks) return m.us(bytes);
      }
      throw InvalidArgument(
          fmt::format("network {}: no all-reduce measured at {} ranks", net.name, ranks));
    case Collective::kHalvingDoubling:
      // A reduce and a broadcast within the node, the whole buffer across nodes.
      return ring_us(net.node.latency_us, node_bw, bytes, g) +
             halving_doubling_us(net.net.latency_us, net_bytes_per_s(net), bytes, m);
    case Collective::kHierarchical: {
      // A reduce-scatter and an all-gather within the node are one ring all-reduce's steps;
      // across nodes, each GPU's 1/g of the data over its 1/g of the NICs.
      const auto gd = static_cast<double>(g);
      return ring_us(net.node.latency_us, node_bw, bytes, g) +
             ring_us(net.net.latency_us, net_bytes_per_s(net) / gd, bytes / gd, m);
    }
  }
  return 0;
}

CoreSharing core_sharing(const Network& net, int64_t ranks, double bytes) {
  for (const MeasuredAllreduce& m : net.measured) {
    if (m.ranks != ranks) continue;
    if (const std::optional<CoreSharing> at = m.sharing_at(bytes)) return *at;
    if (m.blocks_compute) return {*m.blocks_compute, m.stretch.value_or(1)};
  }
  return {net.comm_blocks_compute, net.comm_stretch};
}

CollectiveTime fastest_allreduce(const Network& net, double bytes, int64_t ranks) {
  if (ranks <= 1) return {net.algorithms.front(), 0};
  for (const MeasuredAllreduce& m : net.measured) {
    if (m.ranks == ranks) return {Collective::kMeasured, m.us(bytes)};
  }
  CollectiveTime best{net.algorithms.front(), std::numeric_limits<double>::infinity()};
  for (Collective c : net.algorithms) {
    const double us = allreduce_us(net, c, bytes, ranks);
    if (us < best.us) best = {c, us};
  }
  return best;
}

namespace {

// A ring's alpha and beta by weighted least squares of t = a x1 + c x2 (x1 = 2(n-1) steps,
// x2 = 2(n-1)/n bytes; a the latency in us, c the us per byte), each point weighted by 1/t^2:
// relative error.
class RingFit {
 public:
  void add(int64_t ranks, double bytes, double us) {
    const double n = static_cast<double>(ranks);
    const double x1 = 2 * (n - 1), x2 = allreduce_share(n) * bytes, w = 1 / (us * us);
    s11_ += w * x1 * x1;
    s12_ += w * x1 * x2;
    s22_ += w * x2 * x2;
    s1t_ += w * x1 * us;
    s2t_ += w * x2 * us;
  }
  // {alpha in us, us per byte}; a latency below 0 fits nothing physical: bandwidth alone then.
  std::pair<double, double> solve() const {
    const double det = s11_ * s22_ - s12_ * s12_;
    double a = det > 0 ? (s1t_ * s22_ - s2t_ * s12_) / det : 0;
    double c = det > 0 ? (s11_ * s2t_ - s12_ * s1t_) / det : 0;
    if (a < 0) {
      a = 0;
      c = s22_ > 0 ? s2t_ / s22_ : 0;
    }
    return {a, c};
  }

 private:
  double s11_ = 0, s12_ = 0, s22_ = 0, s1t_ = 0, s2t_ = 0;
};

// A bench row's beside_compute, for its all-reduce of `us` alone: the work it lost (the medians'
// difference, negative where noise made the work beside it faster; from blocks_compute in
// records from before the medians were kept) and its time beside the work (0 where not kept).
struct BesideRow {
  double lost_us = 0, beside_us = 0;
};
BesideRow read_beside(const JsonFields& b, double us) {
  BesideRow row;
  if (b.has("work_beside_s") && b.has("work_alone_s")) {
    row.lost_us = 1e6 * (b.number("work_beside_s", 0, 1e6) - b.number("work_alone_s", 0, 1e6));
  } else {
    row.lost_us = us * b.number("blocks_compute", 0, kMaxBlocksCompute);
  }
  if (b.has("allreduce_beside_s")) row.beside_us = 1e6 * b.number("allreduce_beside_s", 0, 1e6);
  return row;
}

// One bench record's rows as a measured curve, each row also added to `fit`.
MeasuredAllreduce read_bench(const JsonFields& f, RingFit& fit) {
  if (f.string("kind") != "bench_allreduce") f.fail("kind", "\"bench_allreduce\"");
  MeasuredAllreduce m;
  m.ranks = f.integer("ranks", 2, 1 << 20);
  const nlohmann::json& rows = f.array("rows");
  // The rows' beside_compute: the work lost and the all-reduces' time beside it, over the rows'
  // all-reduce time alone.
  double lost_us = 0, beside_us = 0, measured_us = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const JsonFields r(rows[i], f.element("rows", i));
    if (r.integer("wrong", 0) != 0) r.fail("wrong", "a correct reduction (0 wrong)");
    const double bytes = r.number("bytes", 1, 1e15), us = r.number("time_s", 1e-12, 1e6) * 1e6;
    if (!m.points.empty() && bytes <= m.points.back().first) {
      r.fail("bytes", "sizes increasing from one row to the next");
    }
    m.points.emplace_back(bytes, us);
    fit.add(m.ranks, bytes, us);
    m.beside.emplace_back();
    if (r.has("beside_compute")) {
      const BesideRow b = read_beside(r.object("beside_compute"), us);
      lost_us += b.lost_us;
      beside_us += b.beside_us;
      measured_us += us;
      // (Within what a network file takes: a tiny reduction's times are mostly noise.)
      m.beside.back() = MeasuredAllreduce::Beside{
          std::clamp(b.lost_us, -kMaxBlocksCompute * us, kMaxBlocksCompute * us),
          std::min(b.beside_us, kMaxStretch * us)};
    }
  }
  if (m.points.empty()) f.fail("rows", "at least one size");
  if (measured_us > 0) {
    m.blocks_compute = std::clamp(lost_us / measured_us, 0.0, kMaxBlocksCompute);
    if (beside_us > 0) m.stretch = std::clamp(beside_us / measured_us, 1.0, kMaxStretch);
  }
  return m;
}

// The mean of the rank counts' measured `field`; none where none was measured.
std::optional<double> mean_measured(const std::vector<MeasuredAllreduce>& measured,
                                    std::optional<double> MeasuredAllreduce::*field) {
  double sum = 0;
  int counted = 0;
  for (const MeasuredAllreduce& m : measured) {
    if (!(m.*field)) continue;
    sum += *(m.*field);
    ++counted;
  }
  if (counted == 0) return std::nullopt;
  return sum / counted;
}

}  // namespace

Network network_from_bench(const std::vector<nlohmann::json>& benches,
                           const std::vector<std::string>& where, int64_t ranks_per_node) {
  if (benches.empty() || benches.size() != where.size()) {
    throw std::logic_error("network_from_bench: one name per bench record, and at least one");
  }
  Network n;
  n.name = "this-host";
  std::string host = "?", time = "?", mpi = "?";
  bool host_buffers = true;  // every record reduced host buffers (mpi), not a device's
  RingFit fit;
  for (size_t b = 0; b < benches.size(); ++b) {
    const JsonFields f(benches[b], where[b]);
    MeasuredAllreduce m = read_bench(f, fit);
    for (const MeasuredAllreduce& other : n.measured) {
      if (other.ranks == m.ranks) f.fail("ranks", "one record per rank count");
    }
    n.measured.push_back(std::move(m));
    if (f.string_or("buffers", "cpu") != "cpu") host_buffers = false;
    const JsonFields env = f.object("environment");
    host = env.string_or("host", "?");
    time = env.string_or("time", "?");
    mpi = env.string_or("mpi", "?");
  }
  const auto [a, c] = fit.solve();
  if (!(c > 0)) {
    throw InvalidArgument(
        fmt::format("{}: the all-reduce times do not grow with size: no bandwidth can be fitted",
                    where.front()));
  }
  n.description =
      fmt::format("this host ({}): {} all-reduces measured by dlbench bench allreduce", host, mpi);
  n.gpus_per_node = ranks_per_node;
  n.nics_per_node = 1;
  n.node = {"ranks of one host (" + mpi + ")", a, 1e6 / c / 1e9};
  n.net = n.node;
  n.tree_bandwidth_factor = 1;
  n.algorithms = {Collective::kRing};
  for (const std::string& w : where) {
    n.sources.push_back(
        fmt::format("measured: {} (dlbench bench allreduce on {}, {})", w, host, time));
  }
  n.sources.push_back(
      "fitted: a ring's alpha and beta, least squares on relative error over every size and "
      "rank count measured, for the rank counts not measured");
  const std::optional<double> blocks =
      mean_measured(n.measured, &MeasuredAllreduce::blocks_compute);
  // Device buffers (nccl) block no host compute; host records from before the measurement: all.
  n.comm_blocks_compute = blocks.value_or(host_buffers ? 1 : 0);
  n.comm_stretch = mean_measured(n.measured, &MeasuredAllreduce::stretch).value_or(1);
  if (!host_buffers && !blocks) return n;
  n.sources.push_back(
      !blocks
          ? "assumed: the all-reduces run on the cores that compute (MPI on host buffers, its "
            "progress thread without a core of its own), so a rank computes nothing while its "
            "reduction runs"
          : "measured: the host work lost beside each rank count's all-reduces, and their time "
            "beside it, over their time alone (bench allreduce's beside_compute, the rows' sums); "
            "their means for the rank counts not measured");
  return n;
}

}  // namespace dlb
