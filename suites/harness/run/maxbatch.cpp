#include "suites/harness/run/maxbatch.h"

#include <fmt/format.h>

#include <utility>

#include "runtime/core/error.h"
#include "suites/harness/core/environment.h"
#include "suites/harness/core/record.h"
#include "suites/harness/run/training.h"
#include "workloads/models/model.h"

namespace dlb {

MaxBatchSearch search_max_batch(const std::function<BatchProbe(int64_t)>& probe, int64_t first,
                                int64_t limit) {
  MaxBatchSearch s;
  const auto tried = [&](int64_t batch) {
    s.probes.push_back(probe(batch));
    return s.probes.back().fits;
  };
  // fit: the largest batch known to fit (first - 1: none, and none smaller is tried); over: the
  // smallest known not to (0: none).
  int64_t fit = first - 1, over = 0;
  for (int64_t b = first; over == 0; b = std::min(2 * b, limit)) {
    if (tried(b)) {
      fit = b;
      if (b == limit) {
        s.reached_limit = true;
        break;
      }
    } else {
      over = b;
    }
  }
  while (over != 0 && over - fit > 1) {
    const int64_t mid = fit + (over - fit) / 2;
    (tried(mid) ? fit : over) = mid;
  }
  s.batch = fit < first ? 0 : fit;
  return s;
}

void validate_maxbatch_options(const RunOptions& o) {
  const RunOptions d;
  if (!o.memory_budget) {
    throw InvalidArgument(
        "maxbatch searches for the largest batch within --memory-budget: give one");
  }
  // What a probe sets itself, or has no use for: refused rather than silently ignored.
  const std::pair<bool, const char*> unused[] = {
      {o.batch.has_value(), "--batch (the search chooses it)"},
      {o.max_batch_budget.has_value(), "--max-batch-budget (its budget is --memory-budget)"},
      {!o.batch_file.empty(), "--batch-file (it fixes the batch)"},
      {o.ranks != d.ranks, "--ranks (a probe is one rank's step)"},
      {o.data != d.data, "--data (a probe trains on a synthetic batch)"},
      {o.system != d.system, "--system (it searches dlbench's own step)"},
      {o.fault != d.fault, "--inject-fault"},
      {o.steps != d.steps || o.warmup != d.warmup,
       "--steps/--warmup (a probe runs one warm-up step and one step)"},
      {o.repetitions != d.repetitions || o.min_time_s != d.min_time_s,
       "--repetitions/--min-time (a probe times nothing)"},
      {o.trace_steps != d.trace_steps || !o.trace_path.empty() || !o.profile_path.empty(),
       "--trace-steps/--trace/--profile"},
      {!o.dump_path.empty() || !o.save_path.empty() || !o.init_path.empty(),
       "--dump/--save/--init"},
      {o.print_step, "--print-step (it prints one run's step: dlbench run --print-step)"},
  };
  for (const auto& [given, what] : unused) {
    if (given) throw InvalidArgument(fmt::format("maxbatch takes no {}", what));
  }
  validate_run_options(o);
}

const BatchProbe* MaxBatchSearch::found() const {
  for (const BatchProbe& p : probes)
    if (p.fits && p.batch == batch) return &p;
  return nullptr;
}

int64_t smallest_batch(const RunOptions& o) {
  const ModelInfo& info = find_model(o.model);
  const Graph g =
      build_model(o.model, ModelConfig{1, o.image_size.value_or(info.default_image_size),
                                       o.num_classes.value_or(info.default_classes), o.dropout});
  for (const Graph::Node& n : g.nodes()) {
    if (!n.layer || n.layer->kind() != "batch_norm") continue;
    const Shape& in = g.shape(n.inputs.at(0));
    if (in.numel() == in[1]) return 2;
  }
  return 1;
}

namespace {

nlohmann::json probe_json(const BatchProbe& p) {
  nlohmann::json j = {{"batch", p.batch}, {"fits", p.fits}};
  if (p.memory) j["peak_bytes_total"] = p.memory->total_peak;
  if (!p.message.empty()) j["message"] = p.message;
  return j;
}

// A probe: one warm-up step (two with --cuda-graph: the second is captured) and one step at
// `batch`, under `budget`, writing no file.
// `environment`: the run's, when the step fit.
BatchProbe probe(const RunOptions& o, size_t budget, int64_t batch, nlohmann::json* environment) {
  RunOptions p = o;
  p.batch = batch;
  p.memory_budget = budget;
  p.max_batch_budget.reset();
  p.steps = 1;
  p.warmup = o.cuda_graph ? 2 : 1;  // a graph is captured by the second step, then replayed
  p.repetitions = 1;
  p.min_time_s = 0;
  p.trace_steps = 0;
  p.json_path.clear();
  p.trace_path.clear();
  p.profile_path.clear();
  p.save_path.clear();
  p.dump_path.clear();
  p.mllog_path.clear();
  BatchProbe out;
  out.batch = batch;
  try {
    RunResult r = run_training(p);
    out.fits = true;
    out.memory = r.memory;
    if (environment) *environment = std::move(r.environment);
  } catch (const OutOfMemory& e) {
    out.message = e.what();
  }
  return out;
}

std::string peaks_text(const MemoryStats& m) {
  std::string text;
  for (size_t c = 0; c < kNumMemCategories; ++c) {
    if (m.peak[c] == 0) continue;
    text += fmt::format("{}{} {}", text.empty() ? "" : ", ",
                        mem_category_name(static_cast<MemCategory>(c)), format_bytes(m.peak[c]));
  }
  return text;
}

}  // namespace

MaxBatchSearch find_max_batch(const RunOptions& o, size_t budget,
                              const std::function<void(const BatchProbe&)>& on_probe,
                              nlohmann::json* environment) {
  return search_max_batch(
      [&](int64_t batch) {
        BatchProbe p = probe(o, budget, batch, environment);
        if (on_probe) on_probe(p);
        return p;
      },
      smallest_batch(o));
}

nlohmann::json maxbatch_json(const RunOptions& o, const MaxBatchSearch& s,
                             const nlohmann::json& environment) {
  nlohmann::json config = {{"model", o.model},
                           {"backend", backend_kind_name(o.backend)},
                           {"precision", precision_name(o.precision)},
                           {"memory_plan", memory_plan_name(memory_plan_of(o))},
                           {"recompute", recompute_name(o.recompute)},
                           {"swap", swap_name(o.swap)},
                           {"overlap", overlap_name(o.overlap)},
                           {"memory_budget", *o.memory_budget}};
  if (o.image_size) config["image_size"] = *o.image_size;
  nlohmann::json record = {{"schema_version", 1},
                           {"kind", "maxbatch"},
                           {"config", config},
                           {"environment", environment},
                           {"batch", s.batch},
                           {"reached_limit", s.reached_limit},
                           {"probes", nlohmann::json::array()}};
  for (const BatchProbe& p : s.probes) record["probes"].push_back(probe_json(p));
  if (const BatchProbe* found = s.found()) record["memory"] = memory_json(*found->memory);
  return record;
}

namespace {

// A budget above the memory the backend has would search past all of it (to the search's limit),
// allocating what the machine has on the way: refused before the first probe.
void require_budget_within_memory(const RunOptions& o) {
  const size_t memory = make_backend(o.backend, BackendOptions{})->allocator().capacity();
  if (memory > 0 && *o.memory_budget > memory) {
    throw InvalidArgument(fmt::format(
        "--memory-budget ({}) is more than the {} backend's memory here ({}); give at most that",
        format_bytes(*o.memory_budget), backend_kind_name(o.backend), format_bytes(memory)));
  }
}

}  // namespace

int maxbatch_command(const RunOptions& o) {
  validate_maxbatch_options(o);
  require_budget_within_memory(o);
  const std::string budget = format_bytes(*o.memory_budget);
  fmt::print("maxbatch {} ({}, {}, memory plan {}, recompute {}, swap {}) within {}\n", o.model,
             backend_kind_name(o.backend), precision_name(o.precision),
             memory_plan_name(memory_plan_of(o)), recompute_name(o.recompute), swap_name(o.swap),
             budget);
  nlohmann::json environment;
  const MaxBatchSearch s = find_max_batch(
      o, *o.memory_budget,
      [](const BatchProbe& p) {
        if (p.fits) {
          fmt::print("  batch {}: fits, peak {}\n", p.batch, format_bytes(p.memory->total_peak));
        } else {
          fmt::print("  batch {}: out of memory ({})\n", p.batch, p.message);
        }
        std::fflush(stdout);
      },
      &environment);
  if (environment.is_null()) {  // no probe got as far: the backend's own
    environment = collect_environment(*make_backend(o.backend, BackendOptions{}));
  }
  if (!o.json_path.empty()) write_json_atomically(o.json_path, maxbatch_json(o, s, environment));
  if (s.batch == 0) {
    fmt::print("no batch fits: the step of batch {} needs more than {} ({})\n",
               s.probes.front().batch, budget, s.probes.front().message);
    return 1;
  }
  const BatchProbe& found = *s.found();
  fmt::print("largest batch: {}{} (peak {}: {})\n", s.batch,
             s.reached_limit ? " (the search's limit; the budget may hold more)" : "",
             format_bytes(found.memory->total_peak), peaks_text(*found.memory));
  return 0;
}

}  // namespace dlb
