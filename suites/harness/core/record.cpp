#include "suites/harness/core/record.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <utility>

#include "runtime/core/stats.h"
#include "runtime/io/output_file.h"
#include "suites/harness/core/option_table.h"

namespace dlb {

std::string_view run_status_name(RunStatus status) {
  switch (status) {
    case RunStatus::kOk:
      return "ok";
    case RunStatus::kDiverged:
      return "diverged";
    case RunStatus::kOom:
      return "oom";
    case RunStatus::kUnsupported:
      return "unsupported";
    case RunStatus::kTimeout:
      return "timeout";
    case RunStatus::kCrashed:
      return "crashed";
    case RunStatus::kFailed:
      return "failed";
  }
  return "?";
}

std::optional<RunStatus> parse_run_status(std::string_view name) {
  for (RunStatus s : kRunStatuses)
    if (run_status_name(s) == name) return s;
  return std::nullopt;
}

bool is_failure(RunStatus status) {
  return status == RunStatus::kFailed || status == RunStatus::kCrashed ||
         status == RunStatus::kTimeout || status == RunStatus::kDiverged;
}

RunStatus status_for(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kOutOfMemory:
      return RunStatus::kOom;
    case ErrorKind::kUnsupported:
      return RunStatus::kUnsupported;
    default:
      return RunStatus::kFailed;
  }
}

RunResult failed_run(const RunOptions& options, RunStatus status, std::string message) {
  RunResult r;
  r.options = options;
  r.status = status;
  r.message = std::move(message);
  r.ranks = static_cast<int>(options.ranks);
  return r;
}

namespace {
// Every rank on the device does this rank's work: their sum against the device's peak.
double fraction_of_peak(const RunResult& r) {
  const double median = percentile(r.stats->step_seconds, 50);
  return r.flops_per_step / median * r.peak["ranks_sharing_it"].get<double>() /
         r.peak["flops_per_s"].get<double>();
}
// The timed steps' metrics: throughput, step times, the timed phase's shape, the peak's share.
void add_timed_metrics(const RunResult& r, nlohmann::json& m) {
  const RunStats& s = *r.stats;
  const double median = percentile(s.step_seconds, 50);
  m["throughput_img_s"] = s.throughput();
  m["timed_seconds"] = s.timed_seconds;
  m["timed_steps"] = s.timed_steps;
  m["warmup_discarded_steps"] = r.discarded_steps;
  if (!r.repetitions.is_null()) m["repetitions"] = r.repetitions;
  m["step_time_s"] = {{"median", median},
                      {"p10", percentile(s.step_seconds, 10)},
                      {"p90", percentile(s.step_seconds, 90)},
                      {"all", s.step_seconds}};
  m["losses"] = s.losses;
  m["achieved_flops_per_s"] = r.flops_per_step / median;
  if (!r.peak.is_null()) {
    m["peak"] = r.peak;
    m["fraction_of_peak_flops"] = fraction_of_peak(r);
  }
}
// The input's metrics: the loader's counts, the wait per timed step and its share of the median
// step, the rate the loader's threads make images at and the cores they kept busy over the timed
// steps (on a CPU backend, taken from compute), and `input-bound` where the step waited for its
// batch more than 5% of its time.
nlohmann::json input_metrics(const nlohmann::json& loader, double median_step_s,
                             double timed_seconds) {
  nlohmann::json m = loader;
  const auto batches = loader["batches"].get<double>();
  const double wait = batches > 0 ? loader["waited_s"].get<double>() / batches : 0;
  m["waited_per_step_s"] = wait;
  m["wait_share_of_step"] = wait / median_step_s;
  const auto busy = loader["loader_busy_s"].get<double>();
  if (busy > 0) {
    m["loader_img_s"] =
        loader["images_made"].get<double>() / busy * loader["threads"].get<double>();
  }
  m["loader_cores"] = timed_seconds > 0 ? busy / timed_seconds : 0;
  // --decode=gpu: the device decoder's own time a batch, beside the step it runs under.
  const double decoded = loader.value("decode_batches", 0.0);
  if (decoded > 0) {
    const double per = loader["decode_device_s"].get<double>() / decoded;
    m["decode_per_batch_s"] = per;
    m["decode_share_of_step"] = per / median_step_s;
  }
  m["verdict"] = wait > kInputBoundShare * median_step_s ? "input-bound" : "not input-bound";
  return m;
}

// --sync=async's updates: how many, their staleness (median and maximum), and where the
// weights and gradients went between the ranks.
nlohmann::json async_metrics(const std::vector<int64_t>& staleness) {
  nlohmann::json m = {
      {"updates", staleness.size()},
      {"transport", "host copies of weights and gradients, MPI point-to-point to rank 0"}};
  if (staleness.empty()) return m;
  m["staleness_median"] = percentile({staleness.begin(), staleness.end()}, 50);
  m["staleness_max"] = *std::max_element(staleness.begin(), staleness.end());
  return m;
}

// What the step was: its largest batch within a budget, its loss scale, its engines, its graphs.
void add_step_metrics(const RunResult& r, nlohmann::json& m) {
  if (r.max_batch) {
    m["max_batch"] = {{"budget_bytes", r.max_batch->budget},
                      {"batch", r.max_batch->batch},
                      {"probes", r.max_batch->probes},
                      {"reached_limit", r.max_batch->reached_limit},
                      {"peak_bytes_total", r.max_batch->peak_bytes_total}};
  }
  if (r.loss_scale) {
    m["loss_scale"] = *r.loss_scale;
    m["skipped_steps"] = r.skipped_steps;
  }
  if (r.engines) m["engines"] = engines_json(*r.engines);
  if (r.convolutions) m["convolutions"] = conv_passes_json(*r.convolutions);
  if (r.arithmetic) m["arithmetic"] = arithmetic_json(*r.arithmetic);
  if (r.step_graphs) {
    m["cuda_graph"] = {{"graphs", r.step_graphs->graphs},
                       {"operations", r.step_graphs->operations},
                       {"replayed_steps", r.step_graphs->replayed_steps}};
  }
}

// The steps metrics.input is judged against: the timed steps' median and time, or an epoch
// run's training steps'; none where neither ran.
std::optional<std::pair<double, double>> input_steps(const RunResult& r) {
  if (r.stats) return std::pair{percentile(r.stats->step_seconds, 50), r.stats->timed_seconds};
  if (r.convergence.is_object() && r.convergence.contains("median_step_s")) {
    return std::pair{r.convergence["median_step_s"].get<double>(),
                     r.convergence["train_seconds"].get<double>()};
  }
  return std::nullopt;
}

// The console's line for metrics.input.
void print_input(const RunResult& r, std::FILE* out) {
  const auto [median, seconds] = *input_steps(r);
  const nlohmann::json in = input_metrics(r.input, median, seconds);
  fmt::print(
      out,
      "input: {} JPEGs ({}) of {} classes, decoded by {}, {} loader thread(s) at {:.0f} img/s, "
      "{:.2f} cores busy; a step waited {:.4f} s for its batch ({:.1f}% of the step): {}; {} "
      "file(s) skipped\n",
      in["source_images"].get<int64_t>(), in["source"].get<std::string>(),
      in["classes"].get<int64_t>(), in.value("decoder", std::string("libjpeg-turbo")),
      in["threads"].get<int64_t>(), in.value("loader_img_s", 0.0), in["loader_cores"].get<double>(),
      in["waited_per_step_s"].get<double>(), 100 * in["wait_share_of_step"].get<double>(),
      in["verdict"].get<std::string>(), in["skipped"].get<int64_t>());
}

}  // namespace

std::string_view run_mode_name(RunMode mode) {
  switch (mode) {
    case RunMode::kMeasured:
      return "measured";
    case RunMode::kSimulated:
      return "simulated";
  }
  return "?";
}

nlohmann::json record_json(const RunResult& r) {
  using json = nlohmann::json;
  const int64_t batch = r.options.batch.value_or(kDefaultBatch);
  json config = config_json(r.options);
  config["batch"] = batch;  // a run that failed early never resolved it: the default's
  json record = {{"schema_version", kResultSchemaVersion},
                 {"kind", "train"},
                 {"status", run_status_name(r.status)},
                 {"mode", run_mode_name(r.mode)},
                 {"config", config},
                 {"command", reproduce_command(r.options)},
                 {"global_batch", batch * r.ranks}};
  if (r.status != RunStatus::kOk) {
    record["message"] = r.message;
    // A diverged run keeps its metrics, for the losses; the reports show none of it as a result.
    if (r.status != RunStatus::kDiverged) return record;
  }
  record["environment"] = r.environment;
  if (!r.noise.is_null()) record["noise"] = r.noise;
  json m = {{"params", r.params},
            {"forward_flops_per_image", r.forward_flops_per_image},
            {"flops_per_step", r.flops_per_step}};
  if (!r.convergence.is_null()) m.update(r.convergence);
  if (r.stats) add_timed_metrics(r, m);
  if (!r.comm.is_null()) m["comm"] = r.comm;
  if (r.buckets) m["buckets"] = *r.buckets;
  if (r.weights_identical_across_ranks) {
    m["weights_identical_across_ranks"] = *r.weights_identical_across_ranks;
  }
  if (!r.phases.is_null()) m["phases"] = r.phases;
  if (const auto steps = input_steps(r); !r.input.is_null() && steps) {
    m["input"] = input_metrics(r.input, steps->first, steps->second);
  }
  if (r.async_staleness) m["async"] = async_metrics(*r.async_staleness);
  add_step_metrics(r, m);
  record["metrics"] = m;
  if (r.memory) {
    record["memory"] = memory_json(*r.memory);
    if (r.plan_bytes) {
      record["memory"]["plan"] = {{"name", memory_plan_name(memory_plan_of(r.options))},
                                  {"planned_bytes", r.plan_bytes->planned},
                                  {"naive_bytes", r.plan_bytes->naive}};
    }
  }
  if (!r.paths.empty()) record["paths"] = r.paths;
  return record;
}

namespace {

// The console's lines on how the convolutions computed: engines without tensor cores, passes the
// named algorithm could not run, and what a 16-bit run's products read.
void print_convolution_lines(const RunResult& r, std::FILE* out) {
  if (r.engines && !r.engines->without_tensor_cores.empty()) {
    const auto& list = r.engines->without_tensor_cores;
    fmt::print(out,
               "warning: {} of {} {} convolution passes ran on engines without tensor cores "
               "(metrics.engines), the first: {}\n",
               list.size(), r.engines->passes, precision_name(r.options.precision), list.front());
  }
  if (r.convolutions && !r.convolutions->refused.empty()) {
    fmt::print(out,
               "--conv-algo={} could not run {} of {} convolution passes, which took the "
               "heuristic's choice (metrics.convolutions), the first: {}\n",
               conv_algo_choice_name(r.options.conv_algo), r.convolutions->refused.size(),
               r.convolutions->passes, r.convolutions->refused.front());
  }
  if (r.arithmetic && r.arithmetic->data != DType::kF32) {
    fmt::print(out, "{}\n", arithmetic_line(*r.arithmetic));
  }
}

}  // namespace

void print_result(const RunResult& r, std::FILE* out) {
  const RunOptions& o = r.options;
  if (r.status != RunStatus::kOk) {
    fmt::print(out, "{}: {}\n", run_status_name(r.status), r.message);
    return;
  }
  if (r.stats) {
    const RunStats& s = *r.stats;
    const double median = percentile(s.step_seconds, 50);
    fmt::print(out,
               "{} batch {} x {} ranks, {}x{} {} on {}: {:.2f} img/s, step median {:.4f} s (p10 "
               "{:.4f}, p90 {:.4f}), loss {:.4f} -> {:.4f}{}, {:.2f} GFLOP/s per rank\n",
               o.model, o.batch.value_or(kDefaultBatch), r.ranks, o.image_size.value_or(0),
               o.image_size.value_or(0), precision_name(o.precision), r.backend_name,
               s.throughput(), median, percentile(s.step_seconds, 10),
               percentile(s.step_seconds, 90), s.losses.front(), s.losses.back(),
               // A falling loss there is no sign of learning anything but that batch.
               o.data == DataSource::kSynthetic && s.losses.back() < s.losses.front()
                   ? " (one fixed batch, learned by heart)"
                   : "",
               r.flops_per_step / median / 1e9);
  }
  if (r.stats && !r.peak.is_null()) {
    const double fraction = fraction_of_peak(r);
    fmt::print(out, "{:.1f}% of this machine's measured peak of {:.1f} GFLOP/s ({}){}\n",
               100 * fraction, r.peak["flops_per_s"].get<double>() / 1e9,
               r.peak["file"].get<std::string>(),
               fraction > 1 ? ": above it, so the peak is too low (its matrix product was slower "
                              "than this run's kernels)"
                            : "");
  }
  if (!r.input.is_null() && input_steps(r)) print_input(r, out);
  if (r.loss_scale) {
    fmt::print(out, "loss scale {} at the end, {} steps skipped for inf or NaN gradients\n",
               *r.loss_scale, r.skipped_steps);
  }
  print_convolution_lines(r, out);
  if (r.step_graphs) {
    fmt::print(out, "cuda graph: {} steps replayed from {} graph(s) of {} operations\n",
               r.step_graphs->replayed_steps, r.step_graphs->graphs, r.step_graphs->operations);
  }
  if (r.memory) {
    fmt::print(out, "peak memory {} ({})\n", format_bytes(r.memory->total_peak),
               r.memory_budget ? "budget " + format_bytes(*r.memory_budget) : "no budget");
  }
  if (r.max_batch) {
    fmt::print(out, "largest batch within {}: {}{}\n", format_bytes(r.max_batch->budget),
               r.max_batch->batch, r.max_batch->reached_limit ? " (the search's limit)" : "");
  }
}

nlohmann::json memory_json(const MemoryStats& stats) {
  nlohmann::json peak = nlohmann::json::object();
  for (size_t c = 0; c < kNumMemCategories; ++c) {
    peak[std::string(mem_category_name(static_cast<MemCategory>(c)))] = stats.peak[c];
  }
  return {{"peak_bytes_by_category", peak}, {"peak_bytes_total", stats.total_peak}};
}

void write_json_atomically(const std::string& path, const nlohmann::json& j) {
  // A string that is not UTF-8 (a file's name, a log's tail) as U+FFFD: never a record lost.
  write_file_atomically(path,
                        j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace dlb
