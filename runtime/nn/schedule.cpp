#include "runtime/nn/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace dlb {

const char* pass_name(Pass p) {
  switch (p) {
    case Pass::kForward:
      return "forward";
    case Pass::kLoss:
      return "loss";
    case Pass::kBackwardData:
      return "backward_data";
    case Pass::kBackwardWeights:
      return "backward_weights";
    case Pass::kBackward:
      return "backward";
    case Pass::kAccumulate:
      return "accumulate";
    case Pass::kSync:
      return "sync";
    case Pass::kRecompute:
      return "recompute";
    case Pass::kSwapOut:
      return "swap_out";
    case Pass::kSwapIn:
      return "swap_in";
    case Pass::kSwapWait:
      return "swap_wait";
  }
  return "?";
}

const char* step_name(const Step& step) {
  return step.pass == Pass::kSync && step.op_name ? step.op_name : pass_name(step.pass);
}

std::string_view tensor_kind_name(TensorKind k) {
  switch (k) {
    case TensorKind::kInput:
      return "input";
    case TensorKind::kActivation:
      return "activation";
    case TensorKind::kActivationGrad:
      return "activation_grad";
    case TensorKind::kParam:
      return "param";
    case TensorKind::kParamGrad:
      return "param_grad";
    case TensorKind::kBuffer:
      return "buffer";
    case TensorKind::kSaved:
      return "saved";
    case TensorKind::kScratch:
      return "scratch";
    case TensorKind::kLoss:
      return "loss";
    case TensorKind::kCarried:
      return "carried";
    case TensorKind::kGradientBuffer:
      return "gradient_buffer";
    case TensorKind::kSwapped:
      return "swapped";
  }
  return "?";
}

namespace {

void add_edge(std::vector<int>& after, int from) {
  if (from >= 0 && std::find(after.begin(), after.end(), from) == after.end()) {
    after.push_back(from);
  }
}

int base_of(int id, const std::vector<TensorInfo>& tensors) { return dependency_base(id, tensors); }

bool given(TensorKind k) {
  return k == TensorKind::kInput || k == TensorKind::kParam || k == TensorKind::kBuffer;
}

void add_carried(std::vector<CarriedEdge>& carried, int pass, int distance) {
  const CarriedEdge e{pass, distance};
  if (std::find(carried.begin(), carried.end(), e) == carried.end()) carried.push_back(e);
}

// Where a step's passes touch each base tensor, in list order.
struct Touches {
  std::vector<int> readers, writers;
};

std::vector<Touches> touches_of(const Schedule& s, const std::vector<TensorInfo>& tensors) {
  std::vector<Touches> touches(tensors.size());
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const int at = static_cast<int>(i);
    for (int t : s.steps[i].reads) touches[base_of(t, tensors)].readers.push_back(at);
    for (int t : s.steps[i].writes) touches[base_of(t, tensors)].writers.push_back(at);
  }
  return touches;
}

// The carried edges of pass `i` on tensor `t` (link_dependencies), `distance` iterations back.
void carry(Step& step, int i, const Touches& t, bool reads, bool writes, int distance) {
  const int last_writer = t.writers.empty() ? -1 : t.writers.back();
  const bool written_before = !t.writers.empty() && t.writers.front() < i;
  if (reads && !written_before && last_writer > i) add_carried(step.carried, last_writer, distance);
  if (!writes) return;
  if (last_writer > i) add_carried(step.carried, last_writer, distance);
  for (int r : t.readers)
    if (r > i && r > last_writer) add_carried(step.carried, r, distance);
}

void link_carried(Schedule& s, const std::vector<TensorInfo>& tensors) {
  const std::vector<Touches> touches = touches_of(s, tensors);
  for (size_t i = 0; i < s.steps.size(); ++i) {
    Step& step = s.steps[i];
    step.carried.clear();
    std::vector<int> bases;
    for (const auto* list : {&step.reads, &step.writes})
      for (int t : *list) bases.push_back(base_of(t, tensors));
    std::sort(bases.begin(), bases.end());
    bases.erase(std::unique(bases.begin(), bases.end()), bases.end());
    for (int b : bases) {
      auto touched = [&](const std::vector<int>& ids) {
        return std::any_of(ids.begin(), ids.end(), [&](int t) { return base_of(t, tensors) == b; });
      };
      const int turns = tensors[storage_of(b, tensors)].turns;  // as lane_order.cpp reads it
      const int distance = turns > 0 ? turns : 1;
      carry(step, static_cast<int>(i), touches[b], touched(step.reads), touched(step.writes),
            distance);
    }
    std::sort(step.carried.begin(), step.carried.end(),
              [](const CarriedEdge& a, const CarriedEdge& b) {
                return a.pass != b.pass ? a.pass < b.pass : a.distance < b.distance;
              });
  }
}

}  // namespace

int declare_tensor(std::vector<TensorInfo>& table, TensorInfo info) {
  table.push_back(std::move(info));
  return static_cast<int>(table.size()) - 1;
}

int dependency_base(int id, const std::vector<TensorInfo>& tensors) {
  while (tensors[id].alias_of >= 0 &&
         tensors[tensors[id].alias_of].kind != TensorKind::kGradientBuffer) {
    id = tensors[id].alias_of;
  }
  return id;
}

int storage_of(int id, const std::vector<TensorInfo>& tensors) {
  while (tensors[id].alias_of >= 0) id = tensors[id].alias_of;
  return id;
}

bool reads_storage(const Step& step, int s, const std::vector<TensorInfo>& tensors) {
  return std::any_of(step.reads.begin(), step.reads.end(),
                     [&](int r) { return storage_of(r, tensors) == s; });
}

void link_dependencies(Schedule& s, const std::vector<TensorInfo>& tensors) {
  std::vector<int> last_writer(tensors.size(), -1);
  std::vector<std::vector<int>> readers_since_write(tensors.size());
  for (size_t i = 0; i < s.steps.size(); ++i) {
    Step& step = s.steps[i];
    step.after.clear();
    std::vector<int> reads, writes;
    for (int t : step.reads) reads.push_back(base_of(t, tensors));
    for (int t : step.writes) writes.push_back(base_of(t, tensors));
    // A carried read with no writer before it reads the previous iteration's value: iterations
    // run one after another, so it needs no edge.
    for (int t : reads) add_edge(step.after, last_writer[t]);
    for (int t : writes) {
      add_edge(step.after, last_writer[t]);
      for (int r : readers_since_write[t])
        if (r != static_cast<int>(i)) add_edge(step.after, r);
    }
    std::sort(step.after.begin(), step.after.end());
    for (int t : reads) readers_since_write[t].push_back(static_cast<int>(i));
    for (int t : writes) {
      last_writer[t] = static_cast<int>(i);
      readers_since_write[t].clear();
    }
  }
  link_carried(s, tensors);
}

std::vector<std::string> check_schedule(const Schedule& s, const std::vector<TensorInfo>& tensors) {
  std::vector<std::string> problems;
  const int n = static_cast<int>(tensors.size());
  std::vector<char> written(tensors.size(), 0), written_anywhere(tensors.size(), 0);
  for (const Step& step : s.steps)
    for (int t : step.writes)
      if (t >= 0 && t < n) written_anywhere[base_of(t, tensors)] = 1;
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step& step = s.steps[i];
    const std::string where = fmt::format("step {} ({})", i, step_name(step));
    for (const auto* list : {&step.reads, &step.writes, &step.saves}) {
      for (int t : *list) {
        if (t < 0 || t >= n)
          problems.push_back(fmt::format("{}: tensor id {} out of range", where, t));
      }
    }
    for (int t : step.reads) {
      if (t < 0 || t >= n) continue;
      const int base = base_of(t, tensors);
      if (written[base] || given(tensors[base].kind)) continue;
      if (tensors[t].kind == TensorKind::kCarried && written_anywhere[base]) continue;
      problems.push_back(fmt::format("{} reads {} ({}), which no earlier step wrote", where,
                                     tensors[t].name, tensor_kind_name(tensors[t].kind)));
    }
    for (int a : step.after) {
      if (a < 0 || a >= static_cast<int>(i)) {
        problems.push_back(fmt::format("{} depends on step {}, which is not before it", where, a));
      }
    }
    for (const CarriedEdge& e : step.carried) {
      if (e.pass < 0 || e.pass >= static_cast<int>(s.steps.size()) || e.distance < 1) {
        problems.push_back(
            fmt::format("{} depends on step {} of {} iterations back, which is "
                        "not a step of an earlier iteration",
                        where, e.pass, e.distance));
      }
    }
    for (int t : step.writes)
      if (t >= 0 && t < n) written[base_of(t, tensors)] = 1;
  }
  return problems;
}

std::string describe_step(const Step& step, const std::vector<TensorInfo>& tensors,
                          const std::vector<std::string>& node_names) {
  auto names = [&](const std::vector<int>& ids) {
    std::string out;
    for (int t : ids) out += (out.empty() ? "" : ", ") + tensors.at(t).name;
    return out;
  };
  std::string head = step_name(step);
  if (step.node >= 0) head += " " + node_names.at(step.node);
  // A sync pass's bucket: its index, or all of them (-1); a stale slot's or independent ranks'
  // pass names its tensors instead.
  if (step.pass == Pass::kSync && step.arg >= -1) {
    head += step.arg < 0 ? " all" : fmt::format(" {}", step.arg);
  }
  return fmt::format("{} reads[{}] writes[{}]", head, names(step.reads), names(step.writes));
}

}  // namespace dlb
