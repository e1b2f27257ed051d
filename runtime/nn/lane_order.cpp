#include "runtime/nn/lane_order.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <set>
#include <tuple>

namespace dlb {

namespace {

// The passes known to have ended, per lane: each lane's passes end in the order they were
// issued, so the count issued on it up to the last one known to have ended says which.
// Lane::kLoader runs no pass.
constexpr size_t kPassLanes = 4;
using Ended = std::array<int64_t, kPassLanes>;

void join(Ended& into, const Ended& other) {
  for (size_t l = 0; l < kPassLanes; ++l) into[l] = std::max(into[l], other[l]);
}

size_t lane_index(Lane lane) { return static_cast<size_t>(lane); }

std::string describe(const Schedule& s, int pass) {
  const Step& step = s.steps[static_cast<size_t>(pass)];
  const std::string arg =
      step.pass == Pass::kSync && step.arg >= 0 ? fmt::format(" {}", step.arg) : std::string();
  return fmt::format("pass {} ({}{} on {})", pass, step_name(step), arg, lane_name(step.lane));
}

// The schedule's passes issued iteration after iteration, and what each knew to have ended when
// it started and when it ended (`lane_order_problems`'s rules).
// Where each tensor's bytes are (a plan's buffer and range; buffer -1: not planned), and the
// iteration that touches a tensor used in turn.
struct Bytes {
  int buffer = -1;
  size_t begin = 0, end = 0;
};

std::vector<Bytes> bytes_of(const std::vector<TensorInfo>& tensors, const MemoryPlan& plan) {
  std::vector<Bytes> out(tensors.size());
  for (size_t id = 0; id < tensors.size(); ++id) {
    const TensorInfo& t = tensors[id];
    if (t.alias_of < 0) {
      const int b = id < plan.buffer_of.size() ? plan.buffer_of[id] : -1;
      if (b >= 0) out[id] = {b, plan.offset_of[id], plan.offset_of[id] + t.bytes()};
      continue;
    }
    // A view: its base's bytes from its offset (declared after its base: its range is known).
    const Bytes& base = out[static_cast<size_t>(t.alias_of)];
    const size_t from = base.begin + static_cast<size_t>(t.offset) *
                                         dtype_size(tensors[static_cast<size_t>(t.alias_of)].dtype);
    if (base.buffer >= 0) out[id] = {base.buffer, from, from + t.bytes()};
  }
  return out;
}

class Issue {
 public:
  explicit Issue(const Schedule& s) : s_(s) {
    for (const Step& step : s.steps)
      for (const CarriedEdge& e : step.carried) depth_ = std::max(depth_, e.distance);
    ends_.assign(static_cast<size_t>(depth_ + 1), std::vector<Ended>(s.steps.size()));
    seq_.assign(ends_.size(), std::vector<int64_t>(s.steps.size(), 0));
  }
  // Enough iterations for each carried edge to have a source in two of them, after the first
  // `depth` iterations that start with some of theirs missing.
  int iterations() const { return 2 * depth_ + 2; }
  // Also check the bytes `plan` gives the tensors: a pass that touches bytes another pass wrote,
  // or writes bytes another read, starts after it has ended (a reused buffer included).
  void check_bytes(const std::vector<TensorInfo>& tensors, const MemoryPlan& plan) {
    tensors_ = &tensors;
    bytes_ = bytes_of(tensors, plan);
    touched_.assign(plan.buffers.size(), {});
  }
  void run(int iteration, std::vector<std::string>& problems);

 private:
  // A pass's touch of a range of a buffer, in the iteration it ran.
  struct Touch {
    size_t begin, end;
    int pass, iteration, tensor;
    size_t lane;
    int64_t seq;
    bool write;
  };
  void touch_bytes(int pass, int iteration, const Ended& start, int64_t seq,
                   std::vector<std::string>& problems);
  void touch(const Touch& t, const Ended& start, std::vector<std::string>& problems);

  struct Source {
    int pass, distance;  // distance 0: this iteration
  };
  std::vector<Source> sources(const Step& step, int iteration) const;
  Ended start_of(const Step& step, const std::vector<Source>& from, int iteration) const;
  const Ended& end_of(const Source& from, int iteration) const {
    return ends_[slot(iteration - from.distance)][static_cast<size_t>(from.pass)];
  }
  int64_t seq_of(const Source& from, int iteration) const {
    return seq_[slot(iteration - from.distance)][static_cast<size_t>(from.pass)];
  }
  size_t slot(int iteration) const { return static_cast<size_t>(iteration % (depth_ + 1)); }

  const Schedule& s_;
  int depth_ = 0;                             // the longest carried edge
  std::vector<std::vector<Ended>> ends_;      // per iteration (the last depth + 1), per pass
  std::vector<std::vector<int64_t>> seq_;     // its place among its lane's passes, from 1
  std::array<Ended, kPassLanes> lane_end_{};  // what each lane's last pass knew when it ended
  Ended host_{};                              // what the host knows to have ended
  Ended issued_{};                            // passes issued per lane
  std::set<std::tuple<int, int, int>> reported_;
  const std::vector<TensorInfo>* tensors_ = nullptr;  // check_bytes: the table
  std::vector<Bytes> bytes_;                          // its tensors' bytes
  std::vector<std::vector<Touch>> touched_;           // per buffer: touches not yet overwritten
};

std::vector<Issue::Source> Issue::sources(const Step& step, int iteration) const {
  std::vector<Source> from;
  for (int a : step.after) from.push_back({a, 0});
  for (const CarriedEdge& e : step.carried)
    if (iteration - e.distance >= 0) from.push_back({e.pass, e.distance});
  return from;
}

Ended Issue::start_of(const Step& step, const std::vector<Source>& from, int iteration) const {
  Ended start = lane_end_[lane_index(step.lane)];
  join(start, host_);
  if (step.lane == Lane::kComm || step.lane == Lane::kCopy) {
    join(start, lane_end_[lane_index(Lane::kCompute)]);
  }
  if (step.join == Join::kLanes) {
    for (const Source& f : from)
      if (s_.steps[static_cast<size_t>(f.pass)].lane != step.lane)
        join(start, end_of(f, iteration));
  }
  return start;
}

void Issue::run(int iteration, std::vector<std::string>& problems) {
  for (size_t i = 0; i < s_.steps.size(); ++i) {
    const Step& step = s_.steps[i];
    const std::vector<Source> from = sources(step, iteration);
    Ended end = start_of(step, from, iteration);
    for (const Source& f : from) {
      const size_t lane = lane_index(s_.steps[static_cast<size_t>(f.pass)].lane);
      if (end[lane] >= seq_of(f, iteration)) continue;
      if (!reported_.insert({static_cast<int>(i), f.pass, f.distance}).second) continue;
      const std::string back =
          f.distance == 0 ? std::string() : fmt::format(" of the iteration {} back", f.distance);
      problems.push_back(fmt::format("{} starts before {}{} has ended",
                                     describe(s_, static_cast<int>(i)), describe(s_, f.pass),
                                     back));
    }
    const size_t lane = lane_index(step.lane);
    if (tensors_) touch_bytes(static_cast<int>(i), iteration, end, issued_[lane] + 1, problems);
    end[lane] = ++issued_[lane];
    ends_[slot(iteration)][i] = end;
    seq_[slot(iteration)][i] = end[lane];
    lane_end_[lane] = end;
    if (step.lane == Lane::kHost || step.join == Join::kHost) join(host_, end);
  }
}

void Issue::touch_bytes(int pass, int iteration, const Ended& start, int64_t seq,
                        std::vector<std::string>& problems) {
  const Step& step = s_.steps[static_cast<size_t>(pass)];
  for (const bool write : {false, true}) {
    for (int id : write ? step.writes : step.reads) {
      const TensorInfo& info = (*tensors_)[static_cast<size_t>(id)];
      if (info.turns > 0 && iteration % info.turns != info.turn) continue;  // not this one's turn
      const Bytes& b = bytes_[static_cast<size_t>(id)];
      if (b.buffer < 0 || b.begin == b.end) continue;
      touch({b.begin, b.end, pass, iteration, id, lane_index(step.lane), seq, write}, start,
            problems);
    }
  }
}

void Issue::touch(const Touch& t, const Ended& start, std::vector<std::string>& problems) {
  std::vector<Touch>& buffer = touched_[static_cast<size_t>(bytes_[t.tensor].buffer)];
  for (const Touch& before : buffer) {
    if (before.end <= t.begin || t.end <= before.begin || !(t.write || before.write)) continue;
    if (before.pass == t.pass && before.iteration == t.iteration) continue;
    if (start[before.lane] >= before.seq) continue;
    const int distance = t.iteration - before.iteration;
    if (!reported_.insert({t.pass, before.pass, -1 - distance}).second) continue;
    const std::string back =
        distance == 0 ? std::string() : fmt::format(" of the iteration {} back", distance);
    problems.push_back(fmt::format(
        "{} {} {} in bytes that {}{} {} as {}, before it has ended", describe(s_, t.pass),
        t.write ? "writes" : "reads", (*tensors_)[t.tensor].name, describe(s_, before.pass), back,
        before.write ? "wrote" : "read", (*tensors_)[before.tensor].name));
  }
  // A write ends what it covers: whatever touches those bytes later meets the write first.
  if (t.write) {
    buffer.erase(
        std::remove_if(buffer.begin(), buffer.end(),
                       [&](const Touch& b) { return t.begin <= b.begin && b.end <= t.end; }),
        buffer.end());
  }
  buffer.push_back(t);
}

// What check_schedule refuses, which the rules cannot run.
std::vector<std::string> malformed(const Schedule& s) {
  std::vector<std::string> problems;
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step& step = s.steps[i];
    if (lane_index(step.lane) >= kPassLanes) {
      problems.push_back(fmt::format("a {} pass on the {} lane, which runs no pass",
                                     step_name(step), lane_name(step.lane)));
    }
    for (int a : step.after)
      if (a < 0 || static_cast<size_t>(a) >= i) problems.push_back("an edge not into the past");
    for (const CarriedEdge& e : step.carried)
      if (e.pass < 0 || static_cast<size_t>(e.pass) >= s.steps.size() || e.distance < 1)
        problems.push_back("a carried edge out of range");
  }
  return problems;
}

}  // namespace

std::vector<std::string> lane_order_problems(const Schedule& s) {
  std::vector<std::string> problems = malformed(s);
  if (!problems.empty()) return problems;
  Issue issue(s);
  for (int it = 0; it < issue.iterations(); ++it) issue.run(it, problems);
  return problems;
}

std::vector<std::string> lane_order_problems(const Schedule& s,
                                             const std::vector<TensorInfo>& tensors,
                                             const MemoryPlan& plan) {
  std::vector<std::string> problems = malformed(s);
  if (!problems.empty()) return problems;
  if (plan.buffer_of.size() != tensors.size()) return {"a plan of another table"};
  Issue issue(s);
  issue.check_bytes(tensors, plan);
  for (int it = 0; it < issue.iterations(); ++it) issue.run(it, problems);
  return problems;
}

}  // namespace dlb
