#include "runtime/sim/server_replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <memory>
#include <queue>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "runtime/core/error.h"
#include "runtime/core/rng.h"
#include "runtime/overlap/sync_schedule.h"

namespace dlb {

namespace {

constexpr double kNever = -std::numeric_limits<double>::infinity();

// Rank 0 as the replays see it (server_replay.h). `advance(t)` replays the other ranks on until
// every push sent by t is known.
class ParameterServer final : public ServerLane {
 public:
  // The server stops serving once it has applied `pushes`.
  ParameterServer(const ServerCosts& costs, int64_t ranks, size_t pushes,
                  std::function<void(double)> advance)
      : costs_(costs),
        pushes_(pushes),
        advance_(std::move(advance)),
        sent_(static_cast<size_t>(ranks), kNever),
        reply_(static_cast<size_t>(ranks), kNever),
        waiting_(static_cast<size_t>(ranks), false) {}

  void push(int64_t rank, double sent_us) override {
    const auto r = static_cast<size_t>(rank);
    sent_[r] = sent_us;
    waiting_[r] = true;
    queued_.push({sent_us, rank});
  }
  double reply_us(int64_t rank) const override { return reply_[static_cast<size_t>(rank)]; }
  double apply_own(double now_us) override {
    applied_.push_back(now_us + costs_.apply_us);
    return applied_.back();
  }
  double serve(double now_us) override {
    double t = now_us;
    for (size_t served = 0; served + 1 < sent_.size() && !done(); ++served) {
      advance_(t);
      if (queued_.empty() || queued_.top().first > t) return t;
      const int64_t r = queued_.top().second;
      queued_.pop();
      const double transfer = costs_.transfer_us(r);
      t += transfer + costs_.apply_us + costs_.reply_copy_us;
      applied_.push_back(t);
      outgoing_free_ = std::max(t, outgoing_free_) + transfer;
      reply_[static_cast<size_t>(r)] = outgoing_free_;
      waiting_[static_cast<size_t>(r)] = false;
    }
    return t;
  }

  // Whether rank `r` may be replayed on: it has its reply, and its last push was sent by `t`.
  bool behind(int64_t r, double t) const {
    const auto i = static_cast<size_t>(r);
    return !waiting_[i] && sent_[i] <= t;
  }
  bool done() const { return applied_.size() >= pushes_; }
  // When each push was applied, in order: rank 0's clock, so never decreasing.
  const std::vector<double>& applied() const { return applied_; }

 private:
  const ServerCosts& costs_;
  size_t pushes_;
  std::function<void(double)> advance_;
  std::vector<double> sent_, reply_;
  std::vector<bool> waiting_;
  using Queued = std::pair<double, int64_t>;  // (sent, rank): the earliest first
  std::priority_queue<Queued, std::vector<Queued>, std::greater<Queued>> queued_;
  std::vector<double> applied_;
  double outgoing_free_ = 0;
};

void check_async_options(const Schedule& step, const SimulateOptions& o) {
  if (!is_async(step)) throw std::logic_error("an asynchronous SGD schedule with no pull or push");
  if (o.ranks < 2 || o.ranks > kMaxAsyncRanks) {
    throw InvalidArgument(
        fmt::format("simulate: asynchronous SGD replays every rank, from 2 to {}; got {}",
                    kMaxAsyncRanks, o.ranks));
  }
  if (!o.server.transfer_us || !(o.server.apply_us >= 0) || !(o.server.reply_copy_us >= 0)) {
    throw InvalidArgument("simulate: asynchronous SGD needs its parameter server's costs");
  }
}

// Every rank's replay, its speed drawn per iteration, and its totals at the end of each iteration.
class AsyncRanks {
 public:
  AsyncRanks(const Schedule& step, const PassCost& cost, const SimulateOptions& o)
      : o_(o),
        server_(o.server, o.ranks, static_cast<size_t>((o.warmup + o.iterations) * o.ranks),
                [this](double t) { advance(t); }),
        rng_(o.seed),
        ends_(static_cast<size_t>(o.ranks)) {
    const auto shared = std::make_shared<const Schedule>(step);
    for (int64_t r = 0; r < o.ranks; ++r) {
      ranks_.push_back(std::make_unique<RankReplay>(shared, cost, RankLanes{nullptr, &server_, r},
                                                    o.keep_timeline && r == 0));
    }
  }
  void run_iteration(int64_t r) {
    const auto i = static_cast<size_t>(r);
    RankReplay& rank = *ranks_[i];
    rank.run_iteration(draw_factor(r));
    ends_[i].push_back({rank.now_us(), rank.totals()});
  }
  const RankReplay& rank(int64_t r) const { return *ranks_[static_cast<size_t>(r)]; }
  const ParameterServer& server() const { return server_; }
  // Per iteration, over every rank's iterations that ended in (from, to]: busy and waited.
  std::pair<double, double> mean_busy_and_waited(double from, double to) const {
    double busy = 0, waited = 0, iterations = 0;
    for (const std::vector<End>& ends : ends_) {
      RankReplay::Totals before;
      for (const End& e : ends) {
        if (e.at_us > from && e.at_us <= to) {
          busy += e.totals.busy_us - before.busy_us;
          waited += e.totals.waited_us - before.waited_us;
          ++iterations;
        }
        before = e.totals;
      }
    }
    if (iterations == 0) return {0, 0};
    return {busy / iterations, waited / iterations};
  }

 private:
  void advance(double t) {
    for (int64_t r = 1; r < o_.ranks; ++r) {
      while (server_.behind(r, t)) run_iteration(r);
    }
  }
  double draw_factor(int64_t r) {
    const RankSpeeds& s = o_.speeds;
    double f = 1;
    if (!s.jitter.empty()) {
      f = s.jitter[static_cast<size_t>(rng_.below(static_cast<int64_t>(s.jitter.size())))];
    }
    if (r == s.straggler) f *= s.straggler_factor;
    return f * s.compute_factor;
  }

  const SimulateOptions& o_;
  ParameterServer server_;
  Rng rng_;
  std::vector<std::unique_ptr<RankReplay>> ranks_;
  struct End {
    double at_us = 0;
    RankReplay::Totals totals;
  };
  std::vector<std::vector<End>> ends_;  // per rank, per iteration
};

}  // namespace

AsyncRun replay_async(const Schedule& step, const PassCost& cost, const SimulateOptions& o) {
  check_async_options(step, o);
  AsyncRanks ranks(step, cost, o);
  while (!ranks.server().done()) ranks.run_iteration(0);
  // Every rank's worth of pushes is a step: the warm-up's, then the timed ones'.
  const std::vector<double>& applied = ranks.server().applied();
  const auto n = static_cast<size_t>(o.ranks), warmup = static_cast<size_t>(o.warmup);
  auto end_of = [&](size_t steps) { return steps == 0 ? 0.0 : applied[steps * n - 1]; };
  AsyncRun run;
  for (size_t k = warmup; k < warmup + static_cast<size_t>(o.iterations); ++k) {
    run.step_us.push_back(end_of(k + 1) - end_of(k));
  }
  const double from = end_of(warmup), to = end_of(warmup + run.step_us.size());
  std::tie(run.mean_busy_us, run.mean_waited_us) = ranks.mean_busy_and_waited(from, to);
  for (const TimedPass& t : ranks.rank(0).timeline()) {
    if (t.start_us >= from && t.start_us < to) run.timeline.push_back(t);
  }
  return run;
}

}  // namespace dlb
