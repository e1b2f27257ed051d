#include "suites/harness/validate_sim.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "runtime/core/error.h"
#include "runtime/io/json_text.h"
#include "runtime/io/text_file.h"
#include "suites/harness/calibrate.h"
#include "suites/harness/launcher.h"
#include "suites/harness/option_table.h"
#include "suites/harness/record.h"
#include "suites/harness/report_hook.h"
#include "suites/harness/results.h"
#include "suites/harness/run_command.h"
#include "suites/harness/simulate_command.h"
#include "suites/harness/sweep_command.h"
#include "suites/harness/sweep_options.h"

namespace dlb {

namespace {

namespace fs = std::filesystem;

// This host's averaging all-reduce at `ranks`, up to `max_bytes`, as a bench record.
nlohmann::json measure_allreduce(int64_t ranks, size_t max_bytes, const std::string& out) {
  const std::string json = fmt::format("{}/allreduce-{}.json", out, ranks);
  LaunchCommand cmd;
  cmd.argv = {self_executable(),
              "bench",
              "allreduce",
              "--average",
              fmt::format("--ranks={}", ranks),
              fmt::format("--max-bytes={}", max_bytes),
              "--iters=10",
              "--json=" + json};
  const ProcessResult r = run_process(cmd, 600, out + "/allreduce.log", {});
  if (r.exit_code != 0) {
    throw CommError(fmt::format("dlbench bench allreduce --ranks={} failed (exit {}): see {}",
                                ranks, r.exit_code, out + "/allreduce.log"));
  }
  return parse_json(read_text_file(json, "bench record"), json);
}

// The validation's suite: one rank and every rank count, per strategy.
// The run flags of every point, as the suite's defaults.
nlohmann::json point_defaults(const ValidateSimOptions& o) {
  return {{"backend", "cpu"},   {"precision", "fp32"},         {"model", o.model},
          {"batch", o.batch},   {"image_size", o.image_size},  {"steps", o.steps},
          {"warmup", o.warmup}, {"repetitions", o.repetitions}};
}

std::string write_suite(const ValidateSimOptions& o) {
  nlohmann::json overlaps = nlohmann::json::array(), ranks = {1};
  for (OverlapStrategy s : o.overlaps) overlaps.push_back(std::string(overlap_name(s)));
  for (int64_t n : o.ranks) ranks.push_back(n);
  const nlohmann::json defaults = point_defaults(o);
  const nlohmann::json suite = {
      {"name", "validate-sim"},
      {"description",
       "The simulator's validation: measured points to simulate from their one-rank baseline."},
      {"defaults", defaults},
      {"sweep", {{"ranks", ranks}, {"overlap", overlaps}}},
      {"cpu", {{"defaults", {{"backend", "cpu"}}}}}};
  const std::string path = o.out + "/validate-suite.json";
  write_json_atomically(path, suite);
  return path;
}

double mean_step_s(const nlohmann::json& record) {
  const auto& m = record["metrics"];
  return m["timed_seconds"].get<double>() / m["timed_steps"].get<double>();
}

// The relative run-to-run spread of a measured point's throughput: its repetitions' CV.
double spread(const nlohmann::json& record) {
  return record.value("metrics", nlohmann::json::object())
      .value("repetitions", nlohmann::json::object())
      .value("cv", 0.0);
}

// The root mean square of the ok measured points' spreads.
double pooled_spread(const std::vector<nlohmann::json>& records) {
  double squares = 0;
  int64_t n = 0;
  for (const auto& r : records) {
    if (r.value("status", "") != "ok") continue;
    squares += spread(r) * spread(r);
    ++n;
  }
  return std::sqrt(squares / static_cast<double>(std::max<int64_t>(n, 1)));
}

// The simulation of measured point `r` from its one-rank baseline `base` (line `line` of
// `results`), and how far it is from what was measured.
nlohmann::json validate_point(const nlohmann::json& r, const nlohmann::json& base, size_t line,
                              const std::string& results, const Network& network,
                              double compute_factor, const std::string& out) {
  const Calibration c = calibration_from_record(base, out, fmt::format("{}:{}", results, line));
  SimulateCommandOptions so;
  so.ranks = {r["config"]["ranks"].get<int64_t>()};
  so.overlaps = {*parse_overlap(r["config"]["overlap"].get<std::string>())};
  so.bucket_mb = {r["config"]["bucket_mb"].get<double>()};
  so.steps = 50;
  so.compute_factor = compute_factor;
  const nlohmann::json sim = simulate_calibration(c, network, so, out).front();
  const double measured = mean_step_s(r), simulated = sim["metrics"]["scaling_loss"]["step_s"];
  return {{"ranks", so.ranks.front()},
          {"overlap", r["config"]["overlap"]},
          {"measured_point", r["point"]["id"]},
          {"simulated_point", sim["point"]["id"]},
          {"measured_step_s", measured},
          {"simulated_step_s", simulated},
          {"error", simulated / measured - 1},
          {"measured_spread", spread(r)},
          {"calibration_spread", spread(base)},
          {"compute_factor", compute_factor},
          {"measured_scaling_loss", r["metrics"].value("scaling_loss", nlohmann::json())},
          {"simulated_scaling_loss", sim["metrics"]["scaling_loss"]}};
}

void print_validation(const nlohmann::json& v) {
  fmt::print("\n  ranks  overlap    measured s  simulated s   error  spread\n");
  for (const auto& p : v["points"]) {
    fmt::print("  {:>5}  {:<9} {:>10.4f}  {:>11.4f}  {:>+6.1f}%  {:>5.1f}%{}\n",
               p["ranks"].get<int64_t>(), p["overlap"].get<std::string>(),
               p["measured_step_s"].get<double>(), p["simulated_step_s"].get<double>(),
               100 * p["error"].get<double>(), 100 * p["measured_spread"].get<double>(),
               p["within"].get<bool>() ? "" : "  OUTSIDE the bound");
  }
  fmt::print("bound: +-{:.1f}% (3 x sqrt(2) x the pooled run-to-run spread, {:.1f}%)\n",
             100 * v["bound"].get<double>(), 100 * v["pooled_spread"].get<double>());
}

// This host's averaging all-reduces at each rank count, up to twice the gradients' bytes, as a
// network (written to network.json).
Network measure_network(const ValidateSimOptions& o, const std::vector<nlohmann::json>& records) {
  size_t max_bytes = size_t{1} << 20;
  for (const auto& r : records) {
    const double bytes = 4.0 * r.value("metrics", nlohmann::json::object()).value("params", 0.0);
    while (static_cast<double>(max_bytes) < 2 * bytes) max_bytes *= 2;
  }
  std::vector<nlohmann::json> benches;
  std::vector<std::string> where;
  for (int64_t n : o.ranks) {
    benches.push_back(measure_allreduce(n, max_bytes, o.out));
    where.push_back(fmt::format("{}/allreduce-{}.json", o.out, n));
  }
  Network network = network_from_bench(benches, where);
  write_json_atomically(o.out + "/network.json", network_json(network));
  return network;
}

void check_options(const ValidateSimOptions& o) {
  if (o.ranks.empty() || o.overlaps.empty()) {
    throw InvalidArgument("validate-sim: --ranks and --overlap each need a value");
  }
  for (int64_t n : o.ranks) {
    if (n < 2 || n > 64) {
      throw InvalidArgument(fmt::format("validate-sim: --ranks are in [2, 64], got {}", n));
    }
  }
  if (o.repetitions < 2) {
    throw InvalidArgument("validate-sim: --repetitions must be at least 2 (the spread needs them)");
  }
  // The run flags become the suite's defaults: checked here by the option table's rules, so that
  // a refusal names the flag given, not the suite written from it, and comes before any file.
  RunOptions run;
  const nlohmann::json defaults = point_defaults(o);
  for (const auto& [key, value] : defaults.items()) {
    apply_option(run, *find_option(key), value, OptionOrigin::kCommandLine);
  }
  validate_run_options(run);
  if (fs::exists(o.out + "/runs/results.jsonl")) {
    throw InvalidArgument(
        fmt::format("{} already holds a validation: give --out=DIR for a new one", o.out));
  }
}

}  // namespace

int validate_sim_command(const ValidateSimOptions& o) {
  check_options(o);
  fs::create_directories(o.out);
  const int64_t cores = std::max<int64_t>(std::thread::hardware_concurrency(), 1);
  const int64_t most = *std::max_element(o.ranks.begin(), o.ranks.end());
  // Every point, the one-rank ones too, runs with the threads a rank has at the most ranks, so
  // that a one-rank point calibrates a rank's compute.
  const int64_t threads = std::max<int64_t>(cores / most, 1);
  setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
  fmt::print("validate-sim: {} threads a rank on {} hardware threads\n", threads, cores);

  SweepOptions sweep;
  sweep.suite = write_suite(o);
  sweep.out_dir = o.out + "/runs";
  sweep.report = false;
  if (const int rc = sweep_command(sweep); rc != 0) {
    fmt::print(stderr, "validate-sim: the measured points did not all run (exit {}): see {}\n", rc,
               sweep.out_dir);
    return 1;
  }
  const std::string results = sweep.out_dir + "/results.jsonl";
  const std::vector<nlohmann::json> records = read_results(results);

  const Network network = measure_network(o, records);

  // The machine's run-to-run spread, pooled over the validation's points (three repetitions
  // alone estimate a point's poorly), and the bound of an error between two such measurements
  // (the point, and its calibration): three standard deviations of their ratio.
  const double pooled = pooled_spread(records);
  const double bound = 3 * std::sqrt(2.0) * pooled;
  nlohmann::json points = nlohmann::json::array();
  bool all_within = true;
  for (const nlohmann::json& r : records) {
    const int64_t ranks = r["config"].value("ranks", 1);
    if (ranks < 2 || r.value("status", "") != "ok") continue;
    const std::string base_id =
        r.value("metrics", nlohmann::json::object()).value("scaling_baseline", "");
    const auto base = std::find_if(records.begin(), records.end(), [&](const nlohmann::json& b) {
      return b["point"].value("id", "") == base_id;
    });
    if (base == records.end()) continue;
    // Ranks beyond the cores share them: each computes that many times slower.
    const double factor =
        std::max(1.0, static_cast<double>(ranks * threads) / static_cast<double>(cores));
    nlohmann::json p = validate_point(r, *base, static_cast<size_t>(base - records.begin()) + 1,
                                      results, network, factor, sweep.out_dir);
    p["within"] = std::abs(p["error"].get<double>()) <= bound;
    all_within = all_within && p["within"].get<bool>();
    points.push_back(std::move(p));
  }
  if (points.empty()) {
    fmt::print(stderr, "validate-sim: no measured multi-rank point had a one-rank baseline\n");
    return 1;
  }
  const nlohmann::json validation = {
      {"kind", "dlbench validate-sim"},
      {"threads_per_rank", threads},
      {"hardware_threads", cores},
      {"network", o.out + "/network.json"},
      {"results", results},
      {"pooled_spread", pooled},
      {"bound", bound},
      {"bound_rule", "3 x sqrt(2) x the root mean square of the measured points' repetitions CVs"},
      {"points", points}};
  write_json_atomically(o.out + "/validation.json", validation);
  print_validation(validation);
  fmt::print("validation: {}/validation.json\n", o.out);
  render_report(sweep.out_dir);
  return all_within ? 0 : 1;
}

}  // namespace dlb
