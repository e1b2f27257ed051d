#include "suites/harness/validate_sim/validate_sim.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/io/json_text.h"
#include "runtime/io/text_file.h"
#include "suites/harness/core/launcher.h"
#include "suites/harness/core/noise.h"
#include "suites/harness/core/option_table.h"
#include "suites/harness/core/record.h"
#include "suites/harness/core/report_hook.h"
#include "suites/harness/core/results.h"
#include "suites/harness/core/run_options.h"
#include "suites/harness/core/sweep_options.h"

namespace dlb {

namespace {

namespace fs = std::filesystem;

// This host's averaging all-reduce at `ranks`, up to `max_bytes`, as a bench record
// (`out`/allreduce-<ranks>-<tag>.json).
nlohmann::json measure_allreduce(int64_t ranks, size_t max_bytes, const std::string& out,
                                 const std::string& tag) {
  const std::string json = fmt::format("{}/allreduce-{}-{}.json", out, ranks, tag);
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

// The root mean square of the spreads of the ok measured points that `which` takes.
template <typename Pred>
double pooled_spread(const std::vector<nlohmann::json>& records, Pred which) {
  double squares = 0;
  int64_t n = 0;
  for (const auto& r : records) {
    if (r.value("status", "") != "ok" || !which(r)) continue;
    squares += spread(r) * spread(r);
    ++n;
  }
  return std::sqrt(squares / static_cast<double>(std::max<int64_t>(n, 1)));
}

int64_t ranks_of(const nlohmann::json& r) { return r["config"].value("ranks", 1); }

// The simulation of measured point `r` from its one-rank baseline `base` (line `line` of
// `results`), and how far it is from what was measured.
nlohmann::json validate_point(const ValidateSimParts& parts, const nlohmann::json& r,
                              const nlohmann::json& base, size_t line, const std::string& results,
                              const Network& network, double compute_factor,
                              const std::string& out) {
  const nlohmann::json sim =
      parts.simulate(r, base, fmt::format("{}:{}", results, line), network, compute_factor, out);
  const double measured = mean_step_s(r), simulated = sim["metrics"]["scaling_loss"]["step_s"];
  return {{"ranks", r["config"]["ranks"]},
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
  fmt::print("\n  ranks  overlap    measured s  simulated s   error   bound  compute x\n");
  for (const auto& p : v["points"]) {
    fmt::print("  {:>5}  {:<9} {:>10.4f}  {:>11.4f}  {:>+6.1f}%  {:>5.1f}%  {:>9.3f}{}\n",
               p["ranks"].get<int64_t>(), p["overlap"].get<std::string>(),
               p["measured_step_s"].get<double>(), p["simulated_step_s"].get<double>(),
               100 * p["error"].get<double>(), 100 * p["bound"].get<double>(),
               p["compute_factor"].get<double>(),
               p["within"].get<bool>() ? "" : "  OUTSIDE the bound");
  }
  fmt::print(
      "bound: 3 x sqrt(pooled multi-rank spread {:.1f}%^2 + the calibration's spread^2, at "
      "least the one-rank points' pooled {:.1f}%); compute x: measured co-run slowdown\n",
      100 * v["pooled_spread"].get<double>(), 100 * v["pooled_one_rank_spread"].get<double>());
  fmt::print("verdict: {}\n", v["verdict"].get<std::string>());
}

// The median step (s) of `n` one-rank runs of the validation's model started together, each with
// `threads` threads and no communication: the median over the runs of each one's median step.
// The runs' records go to `out`/corun/; also the model's parameter count, from them.
struct CoRun {
  double step_s = 0, params = 0;
};
CoRun corun_step_s(const ValidateSimOptions& o, int64_t n, int64_t threads,
                   const std::string& out) {
  fs::create_directories(out + "/corun");
  std::vector<std::string> jsons;
  std::vector<ProcessResult> results(static_cast<size_t>(n));
  std::vector<std::exception_ptr> failures(static_cast<size_t>(n));
  std::vector<std::string> logs;
  std::vector<std::thread> runs;
  runs.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    jsons.push_back(fmt::format("{}/corun/{}-of-{}.json", out, i + 1, n));
    LaunchCommand cmd;
    cmd.argv = {self_executable(),
                "run",
                "--backend=cpu",
                "--precision=fp32",
                "--model=" + o.model,
                fmt::format("--batch={}", o.batch),
                fmt::format("--image-size={}", o.image_size),
                fmt::format("--steps={}", o.steps),
                fmt::format("--warmup={}", o.warmup),
                "--json=" + jsons.back()};
    cmd.env["OMP_NUM_THREADS"] = std::to_string(threads);
    const std::string log = fmt::format("{}/corun/{}-of-{}.log", out, i + 1, n);
    logs.push_back(log);
    runs.emplace_back([cmd, log, &slot = results[static_cast<size_t>(i)],
                       &failure = failures[static_cast<size_t>(i)]] {
      try {
        slot = run_process(cmd, 600, log, {});
      } catch (...) {  // (an exception leaving a thread would end the process)
        failure = std::current_exception();
      }
    });
  }
  for (std::thread& t : runs) t.join();
  for (const std::exception_ptr& failure : failures) {
    if (failure) std::rethrow_exception(failure);
  }
  std::vector<double> medians;
  CoRun run;
  for (size_t i = 0; i < jsons.size(); ++i) {
    if (results[i].exit_code != 0) {
      throw IoError(fmt::format("validate-sim: a co-run of {} did not end ok ({}): see {}", n,
                                results[i].timed_out ? "timed out"
                                : results[i].signal  ? fmt::format("signal {}", results[i].signal)
                                                     : fmt::format("exit {}", results[i].exit_code),
                                logs[i]));
    }
    const nlohmann::json r = parse_json(read_text_file(jsons[i], "co-run record"), jsons[i]);
    // (Its noise verdict counts the other co-runs as other processes: the sweep's points, run
    // next, are where host activity is judged.)
    medians.push_back(r["metrics"]["step_time_s"]["median"].get<double>());
    run.params = r["metrics"].value("params", 0.0);
  }
  std::sort(medians.begin(), medians.end());
  run.step_s = medians[medians.size() / 2];
  return run;
}

// The bytes the benches reach: a power of two, at least twice the gradients' (params x 4 bytes).
size_t bench_bytes(double params) {
  size_t max_bytes = size_t{1} << 20;
  while (static_cast<double>(max_bytes) < 8 * params) max_bytes *= 2;
  return max_bytes;
}

// This host's averaging all-reduces at each rank count, one bench record per rank count.
std::vector<nlohmann::json> measure_allreduces(const ValidateSimOptions& o, size_t max_bytes,
                                               const std::string& tag) {
  std::vector<nlohmann::json> benches;
  for (int64_t n : o.ranks) benches.push_back(measure_allreduce(n, max_bytes, o.out, tag));
  return benches;
}

// Two benches of the same rank count as one: each size at the faster of its two times. The
// benches run before and after the measured points, minutes apart; on a shared or virtual host
// one of them can be slowed for seconds (here a 32 MiB all-reduce took 33 ms in one bench and
// 47 ms in the next), and a stall only ever slows.
nlohmann::json faster_of(nlohmann::json a, const nlohmann::json& b) {
  for (auto& row : a["rows"]) {
    for (const auto& other : b["rows"]) {
      if (other["bytes"] == row["bytes"] && other.value("wrong", 0) == 0 &&
          (row.value("wrong", 0) != 0 || other["time_s"] < row["time_s"])) {
        row = other;
      }
    }
  }
  return a;
}

// The network from the benches before and after the points (faster_of), written to
// network.json.
Network merge_network(const ValidateSimOptions& o, const std::vector<nlohmann::json>& before,
                      const std::vector<nlohmann::json>& after) {
  std::vector<nlohmann::json> benches;
  std::vector<std::string> where;
  for (size_t i = 0; i < o.ranks.size(); ++i) {
    benches.push_back(faster_of(before[i], after[i]));
    where.push_back(fmt::format("{}/allreduce-{}-{{before,after}}.json", o.out, o.ranks[i]));
  }
  Network network = network_from_bench(benches, where, most_local_ranks());
  write_json_atomically(o.out + "/network.json", network_json(network));
  return network;
}

// What the runs before the measured points found: how many times slower a rank computes beside
// `n - 1` others on this host than alone, for each rank count (what ranks sharing the host's
// cores, caches and memory bandwidth cost their compute, measured with no communication at all,
// corun_step_s, not assumed), and the host's all-reduces (before the points; merge_network).
struct BeforePoints {
  std::map<int64_t, double> factors;
  std::vector<nlohmann::json> benches;
  size_t bench_bytes = 0;  // what the benches reach, after the points too
};

BeforePoints measure_before(const ValidateSimOptions& o, int64_t threads) {
  const CoRun one = corun_step_s(o, 1, threads, o.out);
  const double alone = one.step_s;
  BeforePoints b;
  nlohmann::json j = {{"alone_step_s", alone}, {"threads_per_run", threads}};
  for (int64_t n : o.ranks) {
    const double together = corun_step_s(o, n, threads, o.out).step_s;
    // Beside others a rank is never faster than alone: a ratio below 1 is the host's noise.
    b.factors[n] = std::max(1.0, together / alone);
    j["runs"].push_back(
        {{"runs", n}, {"step_s", together}, {"ratio", together / alone}, {"factor", b.factors[n]}});
  }
  write_json_atomically(o.out + "/corun.json", j);
  b.bench_bytes = bench_bytes(one.params);
  b.benches = measure_allreduces(o, b.bench_bytes, "before");
  return b;
}

void check_options(const ValidateSimOptions& o) {
  if (!o.parts.sweep || !o.parts.simulate) {
    throw std::logic_error("validate-sim without its sweep and simulation (main.cpp sets them)");
  }
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

// The measured points' spreads and the bound of each point's error: three standard deviations
// of the ratio of two independent measurements, the point's and its calibration's. The multi-rank
// points' spread is pooled (three repetitions alone estimate a point's poorly); the calibration's
// is its one-rank point's own, or the one-rank points' pooled spread where that is larger.
struct Spreads {
  double multi = 0, one = 0;
  double bound(double calibration) const {
    const double c = std::max(calibration, one);
    return 3 * std::sqrt(multi * multi + c * c);
  }
};

// A bound above this (runs that varied by more than a sixth) makes the verdict inconclusive.
constexpr double kWidestBound = 0.5;

// Every ok multi-rank point simulated from its one-rank baseline, its error against its bound;
// host activity in a point or its baseline added to `disturbed`.
nlohmann::json judge_points(const ValidateSimParts& parts,
                            const std::vector<nlohmann::json>& records, const Network& network,
                            const std::map<int64_t, double>& factors, const Spreads& spreads,
                            const std::string& results, const std::string& out,
                            std::vector<std::string>& disturbed) {
  nlohmann::json points = nlohmann::json::array();
  for (const nlohmann::json& r : records) {
    if (ranks_of(r) < 2 || r.value("status", "") != "ok") continue;
    const std::string base_id =
        r.value("metrics", nlohmann::json::object()).value("scaling_baseline", "");
    const auto base = std::find_if(records.begin(), records.end(), [&](const nlohmann::json& b) {
      return b["point"].value("id", "") == base_id;
    });
    if (base == records.end()) continue;
    for (const nlohmann::json* x : {&r, &*base}) {
      for (std::string& why : host_activity_reasons(x->value("noise", nlohmann::json()))) {
        disturbed.push_back(fmt::format("point {}: {}", (*x)["point"].value("index", 0), why));
      }
    }
    nlohmann::json p =
        validate_point(parts, r, *base, static_cast<size_t>(base - records.begin()) + 1, results,
                       network, factors.at(ranks_of(r)), out);
    const double bound = spreads.bound(spread(*base));
    p["bound"] = bound;
    p["within"] = std::abs(p["error"].get<double>()) <= bound;
    // Runs that varied this much bound nothing a model could be held to.
    if (bound > kWidestBound) {
      disturbed.push_back(fmt::format(
          "point {}: its runs varied so much that its bound is {:.0f}% (over {:.0f}%), too wide to "
          "tell a model's error from noise",
          r["point"].value("index", 0), 100 * bound, 100 * kWidestBound));
    }
    points.push_back(std::move(p));
  }
  return points;
}

// within, outside (a point's error beyond its bound on an undisturbed host), or inconclusive (the
// host was busy: other processes or the hypervisor took CPU time from a run it judges; or a
// point's bound is over kWidestBound).
std::string verdict(const nlohmann::json& points, const std::vector<std::string>& disturbed) {
  if (!disturbed.empty()) return "inconclusive";
  const bool within = std::all_of(points.begin(), points.end(),
                                  [](const nlohmann::json& p) { return p["within"].get<bool>(); });
  return within ? "within" : "outside";
}

// Every point, the one-rank ones too, runs with the threads a rank has at the most ranks, so that
// a one-rank point calibrates a rank's compute.
int64_t threads_per_rank(const ValidateSimOptions& o) {
  const int64_t cores = std::max<int64_t>(std::thread::hardware_concurrency(), 1);
  const int64_t most = *std::max_element(o.ranks.begin(), o.ranks.end());
  return std::max<int64_t>(cores / most, 1);
}

int finish(const nlohmann::json& validation, const std::string& out, const std::string& runs) {
  write_json_atomically(out + "/validation.json", validation);
  print_validation(validation);
  fmt::print("validation: {}/validation.json\n", out);
  render_report(runs);
  const std::string v = validation["verdict"];
  if (v == "inconclusive") {
    fmt::print("validate-sim: inconclusive: the errors cannot be judged: {}\n",
               fmt::join(validation["disturbed"].get<std::vector<std::string>>(), "; "));
    return 3;
  }
  return v == "within" ? 0 : 1;
}

}  // namespace

int validate_sim_command(const ValidateSimOptions& o) {
  check_options(o);
  fs::create_directories(o.out);
  const int64_t threads = threads_per_rank(o);
  setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
  fmt::print("validate-sim: {} threads a rank on {} hardware threads\n", threads,
             std::thread::hardware_concurrency());
  const BeforePoints before = measure_before(o, threads);
  SweepOptions sweep;
  sweep.suite = write_suite(o);
  sweep.out_dir = o.out + "/runs";
  sweep.report = false;
  if (const int rc = o.parts.sweep(sweep); rc != 0) {
    fmt::print(stderr, "validate-sim: the measured points did not all run (exit {}): see {}\n", rc,
               sweep.out_dir);
    return 1;
  }
  const std::string results = sweep.out_dir + "/results.jsonl";
  const std::vector<nlohmann::json> records = read_results(results);
  const Network network =
      merge_network(o, before.benches, measure_allreduces(o, before.bench_bytes, "after"));
  const Spreads spreads{
      pooled_spread(records, [](const nlohmann::json& r) { return ranks_of(r) > 1; }),
      pooled_spread(records, [](const nlohmann::json& r) { return ranks_of(r) == 1; })};
  std::vector<std::string> disturbed;
  const nlohmann::json points = judge_points(o.parts, records, network, before.factors, spreads,
                                             results, sweep.out_dir, disturbed);
  std::sort(disturbed.begin(), disturbed.end());  // a baseline shared by several points once
  disturbed.erase(std::unique(disturbed.begin(), disturbed.end()), disturbed.end());
  if (points.empty()) {
    fmt::print(stderr, "validate-sim: no measured multi-rank point had a one-rank baseline\n");
    return 1;
  }
  return finish({{"kind", "dlbench validate-sim"},
                 {"threads_per_rank", threads},
                 {"hardware_threads", std::thread::hardware_concurrency()},
                 {"network", o.out + "/network.json"},
                 {"corun", o.out + "/corun.json"},
                 {"results", results},
                 {"pooled_spread", spreads.multi},
                 {"pooled_one_rank_spread", spreads.one},
                 {"bound_rule",
                  "3 x sqrt(the multi-rank points' pooled CV^2 + the calibration's "
                  "CV^2), the calibration's at least the one-rank points' pooled"},
                 {"verdict", verdict(points, disturbed)},
                 {"disturbed", disturbed},
                 {"points", points}},
                o.out, sweep.out_dir);
}

}  // namespace dlb
