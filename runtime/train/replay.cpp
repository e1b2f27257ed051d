#include "runtime/train/replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "runtime/core/error.h"
#include "runtime/overlap/sync_schedule.h"
#include "runtime/train/executor.h"

namespace dlb {

std::pair<double, double> OwnReductionLane::launch(int64_t n, double cost_us, double launch_us) {
  const double start = std::max(launch_us, free_us_);
  free_us_ = start + cost_us;
  ends_[n] = free_us_;
  return {start, free_us_};
}

struct RankReplay::State {
  // Reductions launched one after another while the rank computed (SharingOf), not yet settled:
  // `first`, first + 1, ..., each ending at `ends` alone on the lane, from `base_us` (when the
  // first started on the lane); `done_us` of that work done; the rank's compute counted from
  // `busy_since_us`, the first `ahead_us` of it before they started (at full speed: the
  // reduction waited for the other ranks, or for the one before it).
  struct Flight {
    int64_t first = 0;
    std::vector<double> ends;
    double base_us = 0, done_us = 0, busy_since_us = 0, ahead_us = 0;
    CoreSharing sharing;
    int64_t last() const { return first + static_cast<int64_t>(ends.size()) - 1; }
    double left_us() const { return ends.back() - base_us - done_us; }  // alone work left
  };
  double now_us = 0;
  int64_t iteration = 0, next_reduction = 0;
  // (all-reduce pass, iteration) -> its reduction, not yet waited for
  std::map<std::pair<size_t, int64_t>, int64_t> launched;
  std::map<int, bool> pending;  // bucket -> reduced, not yet applied
  bool pushed = false;          // asynchronous SGD: a push whose reply the next pull takes
  std::optional<Flight> flight;
  std::map<int64_t, double> late_ends;  // reduction -> its end beside compute, past the lane's
  Totals totals;
  size_t timeline_size = 0;
};

namespace {

const std::string kComputeLabel = "pass", kSyncLabel = "sync";

}  // namespace

namespace {

// A wait's predecessors on the comm lane: (pass, iterations back).
using CommSources = std::vector<std::pair<size_t, int64_t>>;

// Per pass of the schedule, a wait's comm sources (none for any other pass), found once. Every
// wait follows a reduction through its edges (link_dependencies): one that follows none would
// end at once, whatever is in flight, and is refused.
std::vector<CommSources> wait_sources(const Schedule& schedule) {
  std::vector<CommSources> sources(schedule.steps.size());
  const auto on_comm = [&](int pass) {
    return schedule.steps[static_cast<size_t>(pass)].lane == Lane::kComm;
  };
  for (size_t i = 0; i < schedule.steps.size(); ++i) {
    const Step& step = schedule.steps[i];
    if (step.pass != Pass::kSync || sync_pass_of(step) != SyncPass::kWait) continue;
    for (int a : step.after)
      if (on_comm(a)) sources[i].emplace_back(static_cast<size_t>(a), 0);
    for (const CarriedEdge& e : step.carried)
      if (on_comm(e.pass)) sources[i].emplace_back(static_cast<size_t>(e.pass), e.distance);
    if (sources[i].empty()) {
      throw std::logic_error(fmt::format(
          "a replay of a schedule whose wait (pass {}) follows no all-reduce: its edges are "
          "not linked (link_dependencies)",
          i));
    }
  }
  return sources;
}

}  // namespace

struct RankReplay::Impl {
  // Layer passes, the loss and swap copies: their cost on the rank's timeline.
  class ComputeRunner final : public PassRunner {
   public:
    explicit ComputeRunner(Impl& r) : r_(r) {}
    void run_pass(const Step& step, const LayerContext*) override {
      r_.charge(step, r_.state.totals.busy_us);
    }
    const std::string& label(const Step&) const override { return kComputeLabel; }

   private:
    Impl& r_;
  };

  // The sync policy's passes, with reductions on the lane and pushes to the server (replay.h).
  class SyncRunner final : public PassRunner {
   public:
    SyncRunner(Impl& r, const Schedule& schedule)
        : r_(r), staleness_(staleness_of(schedule)), sources_(wait_sources(schedule)) {}
    // Bounded staleness: the step's slot, keyed apart from the buckets (-1 and up).
    void begin_step(int64_t index) override {
      if (staleness_ > 0) slot_key_ = -10 - static_cast<int>(stale_slot(index, staleness_));
    }
    void run_pass(const Step& step, const LayerContext*) override {
      State& s = r_.state;
      const int b = step.arg == kStaleSlot ? slot_key_ : step.arg;
      switch (sync_pass_of(step)) {
        case SyncPass::kAllReduce:
          return reduce(step, b);
        case SyncPass::kWait:
          return wait_for(step);
        case SyncPass::kUpdateCarried:  // only where a reduction has come since the last
          return update_if_pending(step, b);
        case SyncPass::kUpdateStale:  // from the slot of K steps before: none in the first K
          return update_if_pending(step, slot_key_);
        case SyncPass::kUpdate:
          s.pending[b] = false;
          return r_.charge(step, s.totals.busy_us);
        case SyncPass::kProgress:
          r_.charge(step, s.totals.progress_us);
          if (r_.lanes.server && r_.lanes.rank == 0) serve();  // asynchronous SGD's rank 0
          return;
        case SyncPass::kStash:  // the step's gradients into its slot, reduced next
          s.pending[slot_key_] = true;
          return r_.charge(step, s.totals.busy_us);
        case SyncPass::kPull:
          return pull(step);
        case SyncPass::kPush:
          return push(step);
      }
    }
    const std::string& label(const Step&) const override { return kSyncLabel; }
    // Until the reductions the wait follows have ended (runtime/nn/lane_order.h): its
    // predecessors on the comm lane, in its iteration (after) or the one its carried edge
    // names (none before the first: the first step of `forward`, the first K of stale:K).
    void wait_for(const Step& step) {
      State& s = r_.state;
      std::vector<std::map<std::pair<size_t, int64_t>, int64_t>::iterator> in_flight;
      for (const auto& [pass, distance] : sources_[r_.index_of(step)]) {
        auto it = s.launched.find({pass, s.iteration - distance});
        if (it != s.launched.end()) in_flight.push_back(it);
      }
      // In the order they were launched, as a flight settles.
      std::sort(in_flight.begin(), in_flight.end(),
                [](const auto& a, const auto& b) { return a->second < b->second; });
      for (const auto& it : in_flight) wait_for(it);
    }
    // Until the reduction `it` names has ended.
    void wait_for(std::map<std::pair<size_t, int64_t>, int64_t>::iterator it) {
      State& s = r_.state;
      if (s.flight && it->second >= s.flight->first) r_.settle_at_wait(it->second);
      double end = r_.reductions().end_us(it->second);
      if (auto late = s.late_ends.find(it->second); late != s.late_ends.end()) {
        end = std::max(end, late->second);
        s.late_ends.erase(late);
      }
      r_.wait_until(end);
      s.launched.erase(it);
    }
    // A skipped carried update is not in the timeline; nor is an all-reduce's launch (its
    // reduction is, on the comm lane).
    bool take_unrecorded(const Step& step) {
      const bool launch = step.pass == Pass::kSync && sync_pass_of(step) == SyncPass::kAllReduce;
      return launch || std::exchange(skipped_, false);
    }

   private:
    void update_if_pending(const Step& step, int key) {
      State& s = r_.state;
      if (!s.pending[key]) {
        skipped_ = true;
        return;
      }
      s.pending[key] = false;
      r_.charge(step, s.totals.busy_us);
    }
    void reduce(const Step& step, int b) {
      State& s = r_.state;
      const bool settled = r_.settle_at_launch();
      const int64_t n = s.next_reduction++;
      const double now = r_.clock.now_us();
      const auto [start, end] = r_.reductions().launch(n, r_.cost(step), now);
      r_.add(step, start, end);
      s.launched[{r_.index_of(step), s.iteration}] = n;
      s.pending[b] = true;
      const CoreSharing sharing = r_.sharing ? r_.sharing(step) : CoreSharing{};
      if (settled) {
        if (sharing.lost > 0) {
          s.flight = State::Flight{n, {end}, start, 0, s.totals.busy_us, start - now, sharing};
        }
        return;
      }
      // Queued behind those still running beside the compute: one flight with them, their
      // sharing weighted by their times alone.
      State::Flight& f = *s.flight;
      const double before = f.ends.back() - f.base_us, alone = end - f.base_us;
      const auto mean = [&](double a, double b) {
        return alone > 0 ? (a * before + b * (alone - before)) / alone : a;
      };
      f.sharing = {mean(f.sharing.lost, sharing.lost), mean(f.sharing.stretch, sharing.stretch)};
      f.ends.push_back(end);
    }
    // Asynchronous SGD: the reply to the last push first, then the copy into the model.
    void pull(const Step& step) {
      State& s = r_.state;
      if (s.pushed) r_.wait_until(r_.server().reply_us(r_.lanes.rank));
      r_.charge(step, s.totals.busy_us);
    }
    void push(const Step& step) {
      State& s = r_.state;
      r_.charge(step, s.totals.busy_us);  // the gradients' copy to the host
      if (r_.lanes.rank != 0) {
        r_.server().push(r_.lanes.rank, r_.clock.now_us());
        s.pushed = true;
        return;
      }
      r_.advance_to(r_.server().apply_own(r_.clock.now_us()), s.totals.busy_us);
      serve();
    }
    // Rank 0: the pushes that have reached it.
    void serve() {
      r_.advance_to(r_.server().serve(r_.clock.now_us()), r_.state.totals.progress_us);
    }

    Impl& r_;
    int64_t staleness_;
    std::vector<CommSources> sources_;  // per pass: a wait's (wait_sources)
    int slot_key_ = 0;
    bool skipped_ = false;
  };

  class Timeline final : public PassObserver {
   public:
    Timeline(Impl& r) : r_(r) {}
    bool wants_marks() const override { return r_.keep_timeline; }
    void pass_ran(const Step& step, const PassRunner&, const Mark& start,
                  const Mark& end) override {
      if (step.pass == Pass::kSync && r_.sync.take_unrecorded(step)) return;
      r_.add(step, start.us, end.us);
    }

   private:
    Impl& r_;
  };

  Impl(std::shared_ptr<const Schedule> schedule, PassCost cost_model, RankLanes shared, bool keep,
       SharingOf cores)
      : cost(std::move(cost_model)),
        lanes(shared),
        keep_timeline(keep),
        sharing(std::move(cores)),
        compute(*this),
        sync(*this, *schedule),
        observer(*this),
        executor(std::move(schedule), PassRunners{&compute, &compute, &sync, &compute}, clock) {}

  // The pass's cost at this iteration's speed, on the clock and in `total`.
  void charge(const Step& step, double& total) {
    const double us = cost(step) * factor;
    clock.advance_us(us);
    total += us;
  }
  // The clock on to `end_us` (nowhere if it has passed), the time spent added to `total`.
  void advance_to(double end_us, double& total) {
    const double spent = std::max(end_us - clock.now_us(), 0.0);
    clock.advance_us(spent);
    total += spent;
  }
  // Until `end_us`: a wait.
  void wait_until(double end_us) { advance_to(end_us, state.totals.waited_us); }
  // Whether the reductions in flight have ended beside the compute the rank did since (K): K > 0
  // and K >= (1 - rho) stretch x the work left, or rho >= 1 (the compute stops while they run).
  // The rank's compute beside the flight's reductions: since they started.
  double beside(const State::Flight& f) const {
    return std::max(state.totals.busy_us - f.busy_since_us - f.ahead_us, 0.0);
  }
  bool outlasted(const State::Flight& f) const {
    const double k = beside(f);
    const double rho = f.sharing.lost / f.sharing.stretch;
    return k > 0 && (rho >= 1 || k >= (1 - rho) * f.sharing.stretch * f.left_us());
  }
  // All of the flight's work left ended beside compute: the rank lost min(lost, stretch) of its
  // time alone, as a wait.
  void lose_flight() {
    const State::Flight& f = *state.flight;
    wait_until(clock.now_us() + std::min(f.sharing.lost, f.sharing.stretch) * f.left_us());
    state.flight.reset();
  }
  // At a launch: the flight settled where it has ended beside the compute. Whether none is left.
  bool settle_at_launch() {
    if (!state.flight) return true;
    if (!outlasted(*state.flight)) return false;
    lose_flight();
    return true;
  }
  // At a wait for reduction `n` of the flight: the compute K since took K / (1 - rho), lost as a
  // wait, while the reductions did K / ((1 - rho) stretch) of their work; from then the cores are
  // theirs, and `n` ends when the work up to its end is done (its late end). The reductions
  // after it go on beside the compute that follows the wait: a flight of their own.
  void settle_at_wait(int64_t n) {
    if (outlasted(*state.flight)) return lose_flight();
    State::Flight f = std::move(*state.flight);
    state.flight.reset();
    const double k = beside(f);
    const double rho = f.sharing.lost / f.sharing.stretch;  // below 1 where k > 0 (outlasted)
    if (k > 0) {
      f.done_us += k / ((1 - rho) * f.sharing.stretch);
      wait_until(clock.now_us() + k * rho / (1 - rho));
    }
    const double to_n = f.ends[static_cast<size_t>(n - f.first)] - f.base_us;
    // (From when they start, where the rank waits before they have: for the other ranks.)
    const double end_n = std::max(clock.now_us(), f.base_us) + std::max(to_n - f.done_us, 0.0);
    state.late_ends[n] = end_n;
    f.done_us = std::max(f.done_us, to_n);
    if (n == f.last() || f.left_us() <= 0) return;
    f.ends.erase(f.ends.begin(), f.ends.begin() + (n + 1 - f.first));
    f.first = n + 1;
    f.busy_since_us = state.totals.busy_us;
    f.ahead_us = 0;
    state.flight = std::move(f);
  }
  ReductionLane& reductions() const {
    if (!lanes.reductions) throw std::logic_error("a replay of all-reduces with no comm lane");
    return *lanes.reductions;
  }
  ServerLane& server() const {
    if (!lanes.server) {
      throw Unsupported(
          "asynchronous SGD is replayed over its ranks and their parameter server "
          "(runtime/sim/simulator.h), not on one rank");
    }
    return *lanes.server;
  }
  size_t index_of(const Step& step) const {
    return static_cast<size_t>(&step - executor.schedule().steps.data());
  }
  void add(const Step& step, double start, double end) {
    if (!keep_timeline) return;
    timeline.push_back({state.iteration, index_of(step), step.lane, start, end});
  }

  VirtualClock clock;
  PassCost cost;
  RankLanes lanes;
  bool keep_timeline;
  SharingOf sharing;
  double factor = 1;
  State state;
  std::vector<TimedPass> timeline;
  ComputeRunner compute;
  SyncRunner sync;
  Timeline observer;
  Executor executor;  // last: its runners are above
};

RankReplay::RankReplay(std::shared_ptr<const Schedule> schedule, PassCost cost, RankLanes lanes,
                       bool keep_timeline, SharingOf sharing)
    : impl_(std::make_unique<Impl>(std::move(schedule), std::move(cost), lanes, keep_timeline,
                                   std::move(sharing))) {}

RankReplay::~RankReplay() = default;

void RankReplay::run_iteration(double factor) {
  impl_->factor = factor;
  impl_->executor.run(impl_->state.iteration, nullptr, &impl_->observer);
  ++impl_->state.iteration;
}

std::shared_ptr<const RankReplay::State> RankReplay::save() const {
  auto s = std::make_shared<State>(impl_->state);
  s->now_us = impl_->clock.now_us();
  s->timeline_size = impl_->timeline.size();
  return s;
}

void RankReplay::restore(const State& state) {
  impl_->state = state;
  impl_->clock.set_us(state.now_us);
  impl_->timeline.resize(state.timeline_size);
}

double RankReplay::now_us() const { return impl_->clock.now_us(); }
RankReplay::Totals RankReplay::totals() const { return impl_->state.totals; }
int64_t RankReplay::iterations() const { return impl_->state.iteration; }
int64_t RankReplay::reductions() const { return impl_->state.next_reduction; }
const std::vector<TimedPass>& RankReplay::timeline() const { return impl_->timeline; }

std::vector<TimedPass> replay(const Schedule& schedule, const PassCost& cost, int64_t iterations) {
  OwnReductionLane lane;
  RankReplay rank(std::make_shared<const Schedule>(schedule), cost, RankLanes{&lane, nullptr, 0},
                  true);
  for (int64_t i = 0; i < iterations; ++i) rank.run_iteration();
  return rank.timeline();
}

}  // namespace dlb
