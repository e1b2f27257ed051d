#include "runtime/sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <stdexcept>

#include "runtime/core/error.h"
#include "runtime/core/rng.h"
#include "runtime/overlap/sync_schedule.h"
#include "runtime/sim/network.h"
#include "runtime/sim/server_replay.h"

namespace dlb {

std::vector<double> normal_jitter(double cv, int64_t n) {
  if (!(cv >= 0 && cv <= kMaxNormalJitterCv) || n < 1 || n > 1000000) {
    throw InvalidArgument(
        fmt::format("a normal jitter's coefficient of variation must be in [0, {}], not {}",
                    kMaxNormalJitterCv, cv));
  }
  // The quantile by bisection on the normal CDF, 0.5 erfc(-z / sqrt 2).
  auto quantile = [](double p) {
    double lo = -40, hi = 40;
    for (int i = 0; i < 64; ++i) {  // 80 / 2^64: below a double's resolution
      const double mid = 0.5 * (lo + hi);
      (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
  };
  std::vector<double> f;
  for (int64_t i = 0; i < n; ++i) {
    f.push_back(1 + cv * quantile((static_cast<double>(i) + 0.5) / static_cast<double>(n)));
  }
  return f;
}

namespace {

constexpr double kNever = -std::numeric_limits<double>::infinity();

// The comm lane every rank shares (simulator.h): a reduction starts once its last rank has
// launched it and the one before it has ended. Until an iteration's round has settled a
// reduction's times, a wait for it costs nothing.
class SharedLane final : public ReductionLane {
 public:
  std::pair<double, double> launch(int64_t n, double cost_us, double launch_us) override {
    grow(n);
    latest_[n] = std::max(latest_[n], launch_us);
    cost_[n] = cost_us;
    return settled_[n] ? times_[n] : std::pair{launch_us, launch_us};
  }
  double end_us(int64_t n) const override {
    return n < static_cast<int64_t>(settled_.size()) && settled_[n] ? times_[n].second : kNever;
  }
  // A new round of reductions [first, ...): their launches are taken again.
  void begin_round(int64_t first) {
    for (size_t n = first; n < latest_.size(); ++n) latest_[n] = kNever;
  }
  // Reductions [first, last) from this round's launches: whether any time changed.
  bool settle(int64_t first, int64_t last) {
    bool changed = false;
    for (int64_t n = first; n < last; ++n) {
      const double free = n > 0 ? times_[n - 1].second : 0.0;
      const double start = std::max(latest_[n], free);
      const std::pair<double, double> t{start, start + cost_[n]};
      if (!settled_[n] || t != times_[n]) changed = true;
      times_[n] = t;
      settled_[n] = true;
    }
    return changed;
  }

 private:
  void grow(int64_t n) {
    if (n < static_cast<int64_t>(latest_.size())) return;
    latest_.resize(n + 1, kNever);
    cost_.resize(n + 1, 0);
    times_.resize(n + 1);
    settled_.resize(n + 1, false);
  }
  std::vector<double> latest_, cost_;
  std::vector<std::pair<double, double>> times_;
  std::vector<bool> settled_;
};

// Ranks of one speed, replayed once.
struct RankClass {
  int64_t size = 0;
  bool straggler = false;
  std::unique_ptr<RankReplay> replay;
};

// The classes of `options`' ranks: one per rank where they jitter, else the ranks at the cost
// model's speed and the straggler. Rank 0 is the first class's.
std::vector<RankClass> rank_classes(const SimulateOptions& o) {
  std::vector<RankClass> classes;
  const bool straggler = o.speeds.straggler >= 0;
  if (!o.speeds.jitter.empty()) {
    for (int64_t r = 0; r < o.ranks; ++r) classes.push_back({1, r == o.speeds.straggler, nullptr});
    return classes;
  }
  if (straggler && o.speeds.straggler == 0) {
    classes.push_back({1, true, nullptr});
    if (o.ranks > 1) classes.push_back({o.ranks - 1, false, nullptr});
  } else {
    classes.push_back({o.ranks - (straggler ? 1 : 0), false, nullptr});
    if (straggler) classes.push_back({1, true, nullptr});
  }
  return classes;
}

// A class's compute factor for one iteration: `uniform`'s where given; otherwise a draw from the
// jitter (1 without), times the straggler's factor where it is the straggler, times every rank's.
double draw_factor(const RankClass& c, const RankSpeeds& speeds, const double* uniform, Rng& rng) {
  double f = uniform ? *uniform : 1.0;
  if (!speeds.jitter.empty()) {
    f = speeds.jitter[static_cast<size_t>(rng.below(static_cast<int64_t>(speeds.jitter.size())))];
  }
  if (c.straggler) f *= speeds.straggler_factor;
  return f * speeds.compute_factor;
}

// One iteration on every class, replayed until the lane's times for its reductions settle.
void replay_iteration(std::vector<RankClass>& classes, SharedLane& lane,
                      const std::vector<double>& factors) {
  std::vector<std::shared_ptr<const RankReplay::State>> saved;
  for (const RankClass& c : classes) saved.push_back(c.replay->save());
  const int64_t first = classes[0].replay->reductions();
  // Each reduction's times depend only on the launches before it and on earlier reductions: a
  // round settles at least one more of them (two or three do all, unless every launch loses part
  // of its reduction's time to it: comm_sharing). More rounds than that cannot happen.
  int64_t rounds = 0;
  for (bool changed = true; changed; ++rounds) {
    if (rounds > classes[0].replay->reductions() - first + 3) {
      throw std::logic_error("simulate: the reductions' times did not settle");
    }
    lane.begin_round(first);
    for (size_t c = 0; c < classes.size(); ++c) {
      if (rounds > 0) classes[c].replay->restore(*saved[c]);
      classes[c].replay->run_iteration(factors[c]);
    }
    changed = lane.settle(first, classes[0].replay->reductions());
  }
}

struct RunTotals {
  std::vector<double> step_us;
  double mean_busy_us = 0, mean_waited_us = 0, mean_factor = 1;
  std::vector<TimedPass> timeline;
  int64_t classes = 0;
};

// The ranks of `o` replayed on a shared lane. `uniform_factor`: every rank at that speed instead
// (no jitter, no straggler).
RunTotals run_ranks(const Schedule& step, const PassCost& cost, const SimulateOptions& o,
                    const double* uniform_factor) {
  SimulateOptions speeds = o;
  if (uniform_factor) speeds.speeds = RankSpeeds{};
  // One rank waits for no one: its draws would only add their sampling noise to its mean.
  if (o.ranks == 1) speeds.speeds.jitter.clear();
  std::vector<RankClass> classes = rank_classes(speeds);
  SharedLane lane;
  const auto shared = std::make_shared<const Schedule>(step);
  for (size_t c = 0; c < classes.size(); ++c) {
    classes[c].replay = std::make_unique<RankReplay>(shared, cost, RankLanes{&lane, nullptr, 0},
                                                     o.keep_timeline && c == 0, o.comm_sharing);
  }
  Rng rng(o.seed);
  const int64_t total = o.warmup + o.iterations;
  std::vector<double> factors(classes.size());
  RunTotals out;
  out.classes = static_cast<int64_t>(classes.size());
  double last_end = 0, factor_sum = 0;
  std::vector<RankReplay::Totals> at_start(classes.size());
  for (int64_t i = 0; i < total; ++i) {
    if (i == o.warmup) {
      for (size_t c = 0; c < classes.size(); ++c) {
        at_start[c] = classes[c].replay->totals();
      }
    }
    for (size_t c = 0; c < classes.size(); ++c) {
      factors[c] = draw_factor(classes[c], speeds.speeds, uniform_factor, rng);
      if (i >= o.warmup) factor_sum += factors[c] * static_cast<double>(classes[c].size);
    }
    replay_iteration(classes, lane, factors);
    double end = kNever;
    for (const RankClass& c : classes) end = std::max(end, c.replay->now_us());
    if (i >= o.warmup) out.step_us.push_back(end - last_end);
    last_end = end;
  }
  const auto n = static_cast<double>(o.ranks), iters = static_cast<double>(o.iterations);
  for (size_t c = 0; c < classes.size(); ++c) {
    const RankReplay& r = *classes[c].replay;
    const double w = static_cast<double>(classes[c].size) / n / iters;
    out.mean_busy_us += w * (r.totals().busy_us - at_start[c].busy_us);
    out.mean_waited_us += w * (r.totals().waited_us - at_start[c].waited_us);
  }
  out.mean_factor = factor_sum / n / iters;
  if (o.keep_timeline) {
    for (const TimedPass& t : classes[0].replay->timeline()) {
      if (t.iteration >= o.warmup) out.timeline.push_back(t);
    }
  }
  return out;
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// The baseline: one rank at the cost model's speed.
RunTotals one_rank_run(const Schedule& one_rank, const PassCost& cost, const SimulateOptions& o) {
  SimulateOptions one = o;
  one.ranks = 1;
  one.speeds = RankSpeeds{};
  one.keep_timeline = false;
  const double unit = 1.0;
  return run_ranks(one_rank, cost, one, &unit);
}

// Asynchronous SGD (simulator.h): every rank replayed against the parameter server.
Simulation simulate_async(const Schedule& step, const Schedule& one_rank, const PassCost& cost,
                          const SimulateOptions& o) {
  const AsyncRun run = replay_async(step, cost, o);
  const RunTotals base = one_rank_run(one_rank, cost, o);
  Simulation sim;
  sim.step_us = run.step_us;
  sim.mean_step_us = mean(sim.step_us);
  sim.timeline = run.timeline;
  sim.replayed_ranks = o.ranks;
  ScalingLoss& l = sim.loss;
  l.one_rank_us = mean(base.step_us);
  l.step_us = sim.mean_step_us;
  l.exposed_comm_us = run.mean_waited_us;
  l.compute_slowdown_us = run.mean_busy_us - base.mean_busy_us;
  l.rest_us = l.step_us - l.one_rank_us - l.exposed_comm_us - l.compute_slowdown_us;
  return sim;
}

}  // namespace

Simulation simulate(const Schedule& step, const Schedule& one_rank, const PassCost& cost,
                    const SimulateOptions& options) {
  if (options.ranks < 1 || options.ranks > kMaxSimulatedRanks) {
    throw InvalidArgument(fmt::format("simulate: ranks must be in [1, {}], got {}",
                                      kMaxSimulatedRanks, options.ranks));
  }
  if (options.iterations < 1 || options.warmup < 0) {
    throw InvalidArgument("simulate: at least one timed iteration, and no negative warm-up");
  }
  const RankSpeeds& s = options.speeds;
  if (s.straggler >= options.ranks) {
    throw InvalidArgument(fmt::format("simulate: the straggler is rank {}, but there are {} ranks",
                                      s.straggler, options.ranks));
  }
  if (s.straggler >= 0 && !(s.straggler_factor >= 1 && std::isfinite(s.straggler_factor))) {
    throw InvalidArgument(
        fmt::format("simulate: a straggler's factor is a finite number of at least 1, got {}",
                    s.straggler_factor));
  }
  if (!(s.compute_factor >= 1 && s.compute_factor <= 1e6)) {
    throw InvalidArgument(
        fmt::format("simulate: the compute factor is at least 1, got {}", s.compute_factor));
  }
  for (double f : s.jitter) {
    if (!(f > 0 && std::isfinite(f))) {
      throw InvalidArgument("simulate: every jitter factor must be finite and above 0");
    }
  }

  if (is_async(step)) return simulate_async(step, one_rank, cost, options);
  Simulation sim;
  RunTotals run = run_ranks(step, cost, options, nullptr);
  sim.step_us = std::move(run.step_us);
  sim.mean_step_us = mean(sim.step_us);
  sim.timeline = std::move(run.timeline);
  sim.replayed_ranks = run.classes;

  const RunTotals base = one_rank_run(one_rank, cost, options);
  // Every rank at the ranks' mean speed: the waits that are the network's alone.
  const bool uneven = (!s.jitter.empty() && options.ranks > 1) || s.straggler >= 0;
  SimulateOptions even = options;
  even.keep_timeline = false;
  const double waits =
      uneven ? run_ranks(step, cost, even, &run.mean_factor).mean_waited_us : run.mean_waited_us;

  ScalingLoss& l = sim.loss;
  l.one_rank_us = mean(base.step_us);
  l.step_us = sim.mean_step_us;
  l.exposed_comm_us = waits;
  l.waiting_for_slowest_us = run.mean_waited_us - waits;
  l.compute_slowdown_us = run.mean_busy_us - base.mean_busy_us;
  l.rest_us = l.step_us - l.one_rank_us - l.exposed_comm_us - l.waiting_for_slowest_us -
              l.compute_slowdown_us;
  return sim;
}

}  // namespace dlb
