#include "runtime/nn/lane_order.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <tuple>

namespace dlb {

namespace {

// What a pass knows to have ended, per queue: a queue's passes end in the order they were
// issued, so a count of them says which. The queues: compute, copy and the host, each one;
// comm has none (a communicator may complete its reductions in any order: MPI's non-blocking
// collectives in poll mode), so each comm pass is a queue of its own per turn of what it
// reduces, whose next launch comes after its last has ended (a wait between them).
using Known = std::vector<int64_t>;
constexpr size_t kCompute = 0, kCopy = 1, kHost = 2, kFirstComm = 3;

void join(Known& into, const Known& other) {
  for (size_t q = 0; q < into.size(); ++q) into[q] = std::max(into[q], other[q]);
}

int turns_of(int id, const std::vector<TensorInfo>& tensors) {
  return tensors[static_cast<size_t>(storage_of(id, tensors))].turns;
}

// Whether iteration `it` touches tensor `id` (a tensor used in turn, only in its turns).
bool touched_in(int id, int64_t it, const std::vector<TensorInfo>& tensors) {
  const TensorInfo& t = tensors[static_cast<size_t>(storage_of(id, tensors))];
  return t.turns == 0 || it % t.turns == t.turn;
}

// Each pass's queue in an iteration.
class Queues {
 public:
  Queues(const Schedule& s, const std::vector<TensorInfo>& tensors)
      : first_(s.steps.size(), 0), turns_(s.steps.size(), 1) {
    for (size_t i = 0; i < s.steps.size(); ++i) {
      const Step& step = s.steps[i];
      if (step.lane != Lane::kComm) continue;
      for (const auto* list : {&step.reads, &step.writes})
        for (int t : *list) turns_[i] = std::max(turns_[i], turns_of(t, tensors));
      first_[i] = count_;
      count_ += static_cast<size_t>(turns_[i]);
    }
  }
  size_t count() const { return count_; }
  size_t of(const Schedule& s, int pass, int64_t iteration) const {
    const auto i = static_cast<size_t>(pass);
    switch (s.steps[i].lane) {
      case Lane::kCompute:
        return kCompute;
      case Lane::kCopy:
        return kCopy;
      case Lane::kComm:
        return first_[i] + static_cast<size_t>(iteration % turns_[i]);
      default:
        return kHost;
    }
  }

 private:
  std::vector<size_t> first_;
  std::vector<int> turns_;
  size_t count_ = kFirstComm;
};

std::string describe(const Schedule& s, int pass) {
  const Step& step = s.steps[static_cast<size_t>(pass)];
  const std::string arg =
      step.pass == Pass::kSync && step.arg >= 0 ? fmt::format(" {}", step.arg) : std::string();
  return fmt::format("pass {} ({}{} on {})", pass, step_name(step), arg, lane_name(step.lane));
}

std::string back(int64_t distance) {
  return distance == 0 ? std::string() : fmt::format(" of the iteration {} back", distance);
}

// Where each tensor's bytes are in a plan: a buffer and a range (buffer -1: not planned).
struct Bytes {
  int buffer = -1;
  size_t begin = 0, end = 0;
};

std::vector<Bytes> bytes_of(const std::vector<TensorInfo>& tensors, const MemoryPlan& plan) {
  std::vector<Bytes> out(tensors.size());
  for (size_t id = 0; id < tensors.size(); ++id) {
    const TensorInfo& t = tensors[id];
    if (t.alias_of < 0) {
      const int b = plan.buffer_of[id];
      if (b >= 0) out[id] = {b, plan.offset_of[id], plan.offset_of[id] + t.bytes()};
      continue;
    }
    // A view: its base's bytes from its offset (declared after its base: its range is known).
    const auto base_id = static_cast<size_t>(t.alias_of);
    const Bytes& base = out[base_id];
    const size_t from =
        base.begin + static_cast<size_t>(t.offset) * dtype_size(tensors[base_id].dtype);
    if (base.buffer >= 0) out[id] = {base.buffer, from, from + t.bytes()};
  }
  return out;
}

// A pass's touch of a range of a buffer, in the iteration it ran.
struct Touch {
  size_t begin, end;
  int pass, tensor;
  int64_t iteration;
  size_t queue;
  int64_t seq;
  bool write;
};

// The schedule's passes issued iteration after iteration, and what each knew to have ended when
// it started (lane_order_problems's rules).
class Issue {
 public:
  Issue(const Schedule& s, const std::vector<TensorInfo>& tensors);
  // Check the bytes `plan` gives the tensors instead of the edges.
  void check_bytes(const MemoryPlan& plan);
  // Enough iterations for each carried edge and each turn to come round twice, after the first
  // `depth` iterations that start with some of their sources missing.
  int64_t iterations() const { return 2 * depth_ + 2; }
  void run(int64_t iteration, std::vector<std::string>& problems);

 private:
  struct Source {
    int pass;
    int64_t distance;  // 0: this iteration
  };
  struct Issued {
    size_t queue = 0;
    int64_t seq = 0;  // its place in its queue, from 1
  };
  std::vector<Source> sources(const Step& step, int64_t iteration) const;
  Known start_of(int pass, const std::vector<Source>& from, int64_t iteration) const;
  void check_relaunch(int pass, size_t queue, const Known& start,
                      std::vector<std::string>& problems);
  void check_edges(int pass, const std::vector<Source>& from, const Known& start, int64_t iteration,
                   std::vector<std::string>& problems);
  bool host_memory_only(int a, int b) const;
  void touch_bytes(int pass, int64_t iteration, const Known& start, const Issued& self,
                   std::vector<std::string>& problems);
  void touch(const Touch& t, const Known& start, std::vector<std::string>& problems);
  size_t slot(int64_t iteration) const { return static_cast<size_t>(iteration % (depth_ + 1)); }
  const Issued& issued(const Source& f, int64_t iteration) const {
    return issued_[slot(iteration - f.distance)][static_cast<size_t>(f.pass)];
  }

  const Schedule& s_;
  const std::vector<TensorInfo>& tensors_;
  Queues queues_;
  int64_t depth_ = 0;                        // the longest carried edge, or turn
  std::vector<std::vector<Issued>> issued_;  // per iteration (the last depth + 1), per pass
  // What a wait's sources knew when they ended, per iteration (the last depth + 1).
  std::map<int, std::vector<Known>> ends_;
  Known compute_, copy_, host_;  // what each queue's last pass knew when it ended
  Known host_memory_;            // what the host knows of host memory (Join::kHostMemory)
  std::vector<int64_t> count_;   // passes issued per queue
  std::set<std::tuple<int, int, int64_t, int, int>> reported_;
  std::vector<Bytes> bytes_;                 // check_bytes: the tensors' bytes
  std::vector<bool> host_buffer_;            // per buffer: host memory
  std::vector<std::vector<Touch>> touched_;  // per buffer: touches not yet overwritten
};

Issue::Issue(const Schedule& s, const std::vector<TensorInfo>& tensors)
    : s_(s), tensors_(tensors), queues_(s, tensors) {
  for (const Step& step : s.steps) {
    for (const CarriedEdge& e : step.carried) depth_ = std::max<int64_t>(depth_, e.distance);
    for (const auto* list : {&step.reads, &step.writes})
      for (int t : *list) depth_ = std::max<int64_t>(depth_, turns_of(t, tensors));
  }
  issued_.assign(static_cast<size_t>(depth_ + 1), std::vector<Issued>(s.steps.size()));
  for (const Step& step : s.steps) {
    if (step.join != Join::kLanes) continue;
    for (const Source& f : sources(step, depth_)) {
      if (s.steps[static_cast<size_t>(f.pass)].lane != step.lane) {
        ends_[f.pass].assign(issued_.size(), Known(queues_.count(), 0));
      }
    }
  }
  compute_ = copy_ = host_ = host_memory_ = Known(queues_.count(), 0);
  count_.assign(queues_.count(), 0);
}

void Issue::check_bytes(const MemoryPlan& plan) {
  bytes_ = bytes_of(tensors_, plan);
  host_buffer_.clear();
  for (const PlannedBuffer& b : plan.buffers) host_buffer_.push_back(is_host_memory(b.category));
  touched_.assign(plan.buffers.size(), {});
}

std::vector<Issue::Source> Issue::sources(const Step& step, int64_t iteration) const {
  std::vector<Source> from;
  for (int a : step.after) from.push_back({a, 0});
  for (const CarriedEdge& e : step.carried)
    if (iteration - e.distance >= 0) from.push_back({e.pass, e.distance});
  return from;
}

Known Issue::start_of(int pass, const std::vector<Source>& from, int64_t iteration) const {
  const Step& step = s_.steps[static_cast<size_t>(pass)];
  // Its queue's last pass; a comm pass follows no other.
  Known start = step.lane == Lane::kCompute ? compute_
                : step.lane == Lane::kCopy  ? copy_
                : step.lane == Lane::kHost  ? host_
                                            : Known(queues_.count(), 0);
  join(start, host_);
  // Launched after the compute work issued before it.
  if (step.lane == Lane::kComm || step.lane == Lane::kCopy) join(start, compute_);
  if (step.join == Join::kLanes) {
    for (const Source& f : from) {
      auto it = ends_.find(f.pass);
      if (it != ends_.end()) join(start, it->second[slot(iteration - f.distance)]);
    }
  }
  return start;
}

// A comm pass launched again before its last launch (of the same turn) has ended: a reduction
// of a buffer still being reduced.
void Issue::check_relaunch(int pass, size_t queue, const Known& start,
                           std::vector<std::string>& problems) {
  if (start[queue] >= count_[queue]) return;
  if (!reported_.insert({pass, pass, -1, -1, -1}).second) return;
  problems.push_back(
      fmt::format("{} is launched again before its last launch has ended", describe(s_, pass)));
}

// Whether every tensor two passes conflict on is in host memory.
bool Issue::host_memory_only(int a, int b) const {
  const Step& x = s_.steps[static_cast<size_t>(a)];
  const Step& y = s_.steps[static_cast<size_t>(b)];
  bool any = false;
  auto check = [&](const std::vector<int>& from, const std::vector<int>& to) {
    for (int t : from) {
      const int base = dependency_base(t, tensors_);
      for (int u : to) {
        if (dependency_base(u, tensors_) != base) continue;
        any = true;
        if (!is_host_memory(tensors_[static_cast<size_t>(storage_of(t, tensors_))].category)) {
          return false;
        }
      }
    }
    return true;
  };
  return check(x.writes, y.reads) && check(x.writes, y.writes) && check(x.reads, y.writes) && any;
}

void Issue::check_edges(int pass, const std::vector<Source>& from, const Known& start,
                        int64_t iteration, std::vector<std::string>& problems) {
  Known with_host_memory = start;
  join(with_host_memory, host_memory_);
  for (const Source& f : from) {
    const Issued& q = issued(f, iteration);
    if (start[q.queue] >= q.seq) continue;
    if (with_host_memory[q.queue] >= q.seq && host_memory_only(f.pass, pass)) continue;
    if (!reported_.insert({pass, f.pass, f.distance, -1, -1}).second) continue;
    problems.push_back(fmt::format("{} starts before {}{} has ended", describe(s_, pass),
                                   describe(s_, f.pass), back(f.distance)));
  }
}

void Issue::run(int64_t iteration, std::vector<std::string>& problems) {
  for (size_t i = 0; i < s_.steps.size(); ++i) {
    const Step& step = s_.steps[i];
    const int pass = static_cast<int>(i);
    const std::vector<Source> from = sources(step, iteration);
    const size_t queue = queues_.of(s_, pass, iteration);
    Known end = start_of(pass, from, iteration);
    if (step.lane == Lane::kComm) check_relaunch(pass, queue, end, problems);
    if (bytes_.empty()) check_edges(pass, from, end, iteration, problems);
    const Issued self{queue, count_[queue] + 1};
    if (!bytes_.empty()) touch_bytes(pass, iteration, end, self, problems);
    end[queue] = ++count_[queue];
    issued_[slot(iteration)][i] = self;
    if (auto it = ends_.find(pass); it != ends_.end()) it->second[slot(iteration)] = end;
    if (step.lane == Lane::kCompute) compute_ = end;
    if (step.lane == Lane::kCopy) copy_ = end;
    if (step.lane == Lane::kHost || step.join == Join::kHost) join(host_, end);
    if (step.join == Join::kHostMemory) join(host_memory_, end);
  }
}

void Issue::touch_bytes(int pass, int64_t iteration, const Known& start, const Issued& self,
                        std::vector<std::string>& problems) {
  const Step& step = s_.steps[static_cast<size_t>(pass)];
  for (const bool write : {false, true}) {
    for (int id : write ? step.writes : step.reads) {
      if (!touched_in(id, iteration, tensors_)) continue;
      const Bytes& b = bytes_[static_cast<size_t>(id)];
      if (b.buffer < 0 || b.begin == b.end) continue;
      touch({b.begin, b.end, pass, id, iteration, self.queue, self.seq, write}, start, problems);
    }
  }
}

void Issue::touch(const Touch& t, const Known& start, std::vector<std::string>& problems) {
  const auto buffer_id = static_cast<size_t>(bytes_[static_cast<size_t>(t.tensor)].buffer);
  std::vector<Touch>& buffer = touched_[buffer_id];
  Known known = start;
  if (host_buffer_[buffer_id]) join(known, host_memory_);
  for (const Touch& before : buffer) {
    if (before.end <= t.begin || t.end <= before.begin || !(t.write || before.write)) continue;
    if (before.pass == t.pass && before.iteration == t.iteration) continue;
    if (known[before.queue] >= before.seq) continue;
    const int64_t distance = t.iteration - before.iteration;
    if (!reported_.insert({t.pass, before.pass, -1 - distance, t.tensor, before.tensor}).second) {
      continue;
    }
    problems.push_back(fmt::format(
        "{} {} {} in bytes that {}{} {} as {}, before it has ended", describe(s_, t.pass),
        t.write ? "writes" : "reads", tensors_[static_cast<size_t>(t.tensor)].name,
        describe(s_, before.pass), back(distance), before.write ? "wrote" : "read",
        tensors_[static_cast<size_t>(before.tensor)].name));
  }
  // A write ends what it covers: whatever touches those bytes later meets the write first. A
  // pass's read follows its own last read of the same bytes (its queue's order, or a wait).
  buffer.erase(std::remove_if(buffer.begin(), buffer.end(),
                              [&](const Touch& b) {
                                return t.write ? t.begin <= b.begin && b.end <= t.end
                                               : !b.write && b.pass == t.pass &&
                                                     b.begin == t.begin && b.end == t.end;
                              }),
               buffer.end());
  buffer.push_back(t);
}

// What check_schedule refuses, which the rules cannot run.
std::vector<std::string> malformed(const Schedule& s, const std::vector<TensorInfo>& tensors) {
  std::vector<std::string> problems;
  const auto in_table = [&](int t) { return t >= 0 && static_cast<size_t>(t) < tensors.size(); };
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step& step = s.steps[i];
    if (step.lane == Lane::kLoader) {
      problems.push_back(
          fmt::format("a {} pass on the loader lane, which runs no pass", step_name(step)));
    }
    for (int a : step.after)
      if (a < 0 || static_cast<size_t>(a) >= i) problems.push_back("an edge not into the past");
    for (const CarriedEdge& e : step.carried)
      if (e.pass < 0 || static_cast<size_t>(e.pass) >= s.steps.size() || e.distance < 1)
        problems.push_back("a carried edge out of range");
    for (const auto* list : {&step.reads, &step.writes})
      if (!std::all_of(list->begin(), list->end(), in_table))
        problems.push_back("a tensor out of the table");
  }
  return problems;
}

std::vector<std::string> run_issue(const Schedule& s, const std::vector<TensorInfo>& tensors,
                                   const MemoryPlan* plan) {
  std::vector<std::string> problems = malformed(s, tensors);
  if (!problems.empty()) return problems;
  if (plan && plan->buffer_of.size() != tensors.size()) return {"a plan of another table"};
  Issue issue(s, tensors);
  if (plan) issue.check_bytes(*plan);
  for (int64_t it = 0; it < issue.iterations(); ++it) issue.run(it, problems);
  return problems;
}

}  // namespace

std::vector<std::string> lane_order_problems(const Schedule& s,
                                             const std::vector<TensorInfo>& tensors) {
  return run_issue(s, tensors, nullptr);
}

std::vector<std::string> plan_lane_problems(const Schedule& s,
                                            const std::vector<TensorInfo>& tensors,
                                            const MemoryPlan& plan) {
  return run_issue(s, tensors, &plan);
}

}  // namespace dlb
