#include "suites/harness/validate_sim/validate_sim.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/host_cpus.h"
#include "runtime/core/stats.h"
#include "runtime/io/json_text.h"
#include "runtime/io/text_file.h"
#include "suites/harness/core/host_steadiness.h"
#include "suites/harness/core/launcher.h"
#include "suites/harness/core/measured_loss.h"
#include "suites/harness/core/noise.h"
#include "suites/harness/core/option_table.h"
#include "suites/harness/core/record.h"
#include "suites/harness/core/report_hook.h"
#include "suites/harness/core/results.h"
#include "suites/harness/core/run_options.h"
#include "suites/harness/core/sweep_options.h"
#include "suites/harness/core/timed_phase.h"

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
  fmt::print("\n  ranks  overlap    measured s  simulated s   error   bound  compute x (spread)\n");
  for (const auto& p : v["points"]) {
    fmt::print("  {:>5}  {:<9} {:>10.4f}  {:>11.4f}  {:>+6.1f}%  {:>5.1f}%  {:>9.3f} ({:.1f}%){}\n",
               p["ranks"].get<int64_t>(), p["overlap"].get<std::string>(),
               p["measured_step_s"].get<double>(), p["simulated_step_s"].get<double>(),
               100 * p["error"].get<double>(), 100 * p["bound"].get<double>(),
               p["compute_factor"].get<double>(), 100 * p["compute_factor_spread"].get<double>(),
               p["within"].get<bool>() ? "" : "  OUTSIDE the bound");
  }
  fmt::print(
      "bound: 3 x sqrt(pooled multi-rank spread {:.1f}%^2 + the calibration's spread^2 (at "
      "least the one-rank points' pooled {:.1f}%) + the compute factor's spread^2); compute x: "
      "ranks in step over one alone, the co-run rounds' median\n",
      100 * v["pooled_spread"].get<double>(), 100 * v["pooled_one_rank_spread"].get<double>());
  fmt::print("verdict: {}\n", v["verdict"].get<std::string>());
}

// A co-run: `n` ranks of the validation's model started by the points' launcher (mpirun, with
// its binding), under --sync=independent where n > 1: the ranks meet after backward as
// synchronous ranks do and exchange no gradients, so they compute in step, as the points' ranks
// do. (Processes started apart drift out of phase, and their memory-bound passes, SGD's above all,
// seldom meet; ranks in step run them together.) Its record goes to `out`/corun/TAG-n.json and
// each rank's trace beside it. The record, and its ranks' traces, rank 0 first.
struct CoRun {
  nlohmann::json record;
  std::vector<nlohmann::json> traces;
};
CoRun corun(const ValidateSimOptions& o, int64_t n, const std::string& tag) {
  const std::string out = o.out + "/corun";
  fs::create_directories(out);
  const std::string json = fmt::format("{}/{}-{}.json", out, tag, n);
  const std::string log = fmt::format("{}/{}-{}.log", out, tag, n);
  std::vector<std::string> argv = {self_executable(),
                                   "run",
                                   "--backend=cpu",
                                   "--precision=fp32",
                                   "--model=" + o.model,
                                   fmt::format("--batch={}", o.batch),
                                   fmt::format("--image-size={}", o.image_size),
                                   fmt::format("--steps={}", o.steps),
                                   fmt::format("--warmup={}", o.warmup),
                                   fmt::format("--trace-steps={}", o.steps),
                                   fmt::format("--trace={}/{}-{}.trace.json", out, tag, n),
                                   "--json=" + json};
  if (n > 1) argv.insert(argv.end(), {fmt::format("--ranks={}", n), "--sync=independent"});
  const ProcessResult r =
      run_process(launch_command_here(LauncherKind::kAuto, n, argv), 600, log, {});
  if (r.exit_code != 0) {
    throw IoError(fmt::format("validate-sim: the co-run of {} did not end ok ({}): see {}", n,
                              r.timed_out ? "timed out"
                              : r.signal  ? fmt::format("signal {}", r.signal)
                                          : fmt::format("exit {}", r.exit_code),
                              log));
  }
  CoRun c{parse_json(read_text_file(json, "co-run record"), json), {}};
  const nlohmann::json& paths = c.record.value("paths", nlohmann::json::object());
  std::vector<std::string> traces;
  if (paths.contains("traces")) traces = paths["traces"].get<std::vector<std::string>>();
  if (traces.size() != static_cast<size_t>(n)) {
    throw IoError(fmt::format("validate-sim: the co-run of {} lists {} traces: see {}", n,
                              traces.size(), json));
  }
  for (const std::string& t : traces) c.traces.push_back(parse_json(read_text_file(t, "trace"), t));
  return c;
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

// One round of co-runs (`tag`): the model alone, then each rank count's ranks in step (corun).
// Each rank count's ratio: the run alone's step plus how much longer its ranks' compute lanes were
// busy a step than the run alone's (their mean; measured_scaling_loss's compute_slowdown), over
// the run alone's step. That is the factor a simulated rank's calibrated step is scaled by
// (runtime/sim/calibration.h). Host activity in a co-run goes to `disturbed`, as a point's does,
// and for its run alone the spread of its steps too (lone_run_reasons), as for a baseline; the
// round's part of corun.json to `log`.
std::map<int64_t, double> corun_round(const ValidateSimOptions& o, const std::string& tag,
                                      nlohmann::json& log, double& params,
                                      std::vector<std::string>& disturbed) {
  // As the points and their baselines are: a run alone's steps' spread counts too (the run
  // alone's record says it ran alone; the ranks' say they did not).
  const auto judge = [&](const CoRun& c, int64_t n) {
    for (std::string& why : lone_run_reasons(c.record.value("noise", nlohmann::json()))) {
      disturbed.push_back(fmt::format("co-run {}-{}: {}", tag, n, why));
    }
  };
  const CoRun alone = corun(o, 1, tag);
  judge(alone, 1);
  params = alone.record["metrics"].value("params", 0.0);
  nlohmann::json round = {{"round", tag},
                          {"alone_step_s", alone.record["metrics"]["step_time_s"]["median"]}};
  std::map<int64_t, double> ratios;
  for (int64_t n : o.ranks) {
    const CoRun together = corun(o, n, tag);
    judge(together, n);
    const nlohmann::json loss = measured_scaling_loss(
        together.traces, alone.traces.front(), fmt::format("{}/corun/{}-{}.json", o.out, tag, n));
    const double one = loss["one_rank_step_s"], slower = loss["compute_slowdown_s"];
    ratios[n] = (one + slower) / one;
    round["runs"].push_back({{"runs", n},
                             {"step_s", together.record["metrics"]["step_time_s"]["median"]},
                             {"one_rank_step_s", one},
                             {"compute_slowdown_s", slower},
                             {"ratio", ratios[n]}});
  }
  log["rounds"].push_back(std::move(round));
  return ratios;
}

// How many times slower a rank computes beside `n - 1` others on this host than alone, for each
// rank count: what ranks sharing the host's cores, caches and memory bandwidth cost their
// compute, measured in step with no communication at all, not assumed. The median of the
// rounds' ratios (rounds before the points and after them, as the all-reduce benches are: the
// host's speed drifts over minutes), at least 1 (beside others a rank is never faster than alone:
// a ratio below 1 is the host's noise); `spread`, the ratios' coefficient of variation, is part
// of each point's bound.
struct ComputeFactor {
  double factor = 1, spread = 0;
};
struct CoRuns {
  std::map<int64_t, std::vector<double>> ratios;
  nlohmann::json log;                  // corun.json
  double params = 0;                   // the model's, for the benches' sizes
  std::vector<std::string> disturbed;  // host activity during a co-run
  void round(const ValidateSimOptions& o, const std::string& tag) {
    for (const auto& [n, r] : corun_round(o, tag, log, params, disturbed)) ratios[n].push_back(r);
  }
  std::map<int64_t, ComputeFactor> factors() const {
    std::map<int64_t, ComputeFactor> out;
    for (const auto& [n, r] : ratios)
      out[n] = {std::max(1.0, percentile(r, 50)), dlb::spread(r).cv};
    return out;
  }
};

// What the runs before the measured points found: the first rounds of co-runs, and the host's
// all-reduces (merge_network).
struct BeforePoints {
  CoRuns coruns;
  std::vector<nlohmann::json> benches;
  size_t bench_bytes = 0;  // what the benches reach, after the points too
};

// Rounds of co-runs around the points: as many as repetitions, the first half (rounded up) before.
int64_t rounds_before(const ValidateSimOptions& o) { return (o.repetitions + 1) / 2; }

BeforePoints measure_before(const ValidateSimOptions& o, int64_t threads) {
  BeforePoints b;
  b.coruns.log = {{"threads_per_run", threads}, {"in_step", "--sync=independent"}};
  for (int64_t i = 0; i < rounds_before(o); ++i) b.coruns.round(o, fmt::format("before-{}", i + 1));
  b.bench_bytes = bench_bytes(b.coruns.params);
  b.benches = measure_allreduces(o, b.bench_bytes, "before");
  return b;
}

// The rounds of co-runs after the points; writes corun.json with every round and the factors.
std::map<int64_t, ComputeFactor> measure_after(const ValidateSimOptions& o, CoRuns& coruns) {
  for (int64_t i = rounds_before(o); i < o.repetitions; ++i) {
    coruns.round(o, fmt::format("after-{}", i - rounds_before(o) + 1));
  }
  const std::map<int64_t, ComputeFactor> factors = coruns.factors();
  for (const auto& [n, f] : factors) {
    coruns.log["factors"].push_back(
        {{"runs", n}, {"factor", f.factor}, {"spread", f.spread}, {"ratios", coruns.ratios.at(n)}});
  }
  write_json_atomically(o.out + "/corun.json", coruns.log);
  return factors;
}

// The host's steadiness before and after the runs (host_steadiness.h), each printed as measured:
// both go to validation.json, and a reason to `disturbed` for each time the host did not hold its
// speed, and for a change between the two.
struct HostSteadiness {
  std::vector<std::pair<std::string, Steadiness>> measured;
  void measure(const std::string& when) {
    const Steadiness s = measure_steadiness();
    fmt::print("validate-sim: the host {}: a memory stream of one thread moved {}\n", when,
               steadiness_summary(s));
    measured.emplace_back(when, s);
  }
  nlohmann::json json() const {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& [when, s] : measured) out.push_back(steadiness_json(s, when));
    return out;
  }
  void add_reasons(std::vector<std::string>& disturbed) const {
    for (const auto& [when, s] : measured) {
      if (auto why = steadiness_reason(s, when)) disturbed.push_back(std::move(*why));
    }
    if (measured.size() < 2) return;
    if (auto why = steadiness_change_reason(measured.front().second, measured.back().second)) {
      disturbed.push_back(std::move(*why));
    }
  }
};

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
  // `factor`: the spread of the compute factor the point was simulated with (ComputeFactor),
  // also at least the one-rank points' pooled spread: two or three rounds estimate it poorly.
  double bound(double calibration, double factor) const {
    const double c = std::max(calibration, one), f = std::max(factor, one);
    return 3 * std::sqrt(multi * multi + c * c + f * f);
  }
};

// A bound above this (runs that varied by more than a sixth) makes the verdict inconclusive.
constexpr double kWidestBound = 0.5;

// Every ok multi-rank point simulated from its one-rank baseline, its error against its bound;
// host activity in a point or its baseline added to `disturbed`, and the baseline's steps'
// spread (a run alone: lone_run_reasons).
nlohmann::json judge_points(const ValidateSimParts& parts,
                            const std::vector<nlohmann::json>& records, const Network& network,
                            const std::map<int64_t, ComputeFactor>& factors, const Spreads& spreads,
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
    // A busy host disturbs both; the baseline runs alone (its record says so, the point's that
    // its ranks share the host), so its steps' own spread is the host's.
    for (const nlohmann::json* x : {&r, &*base}) {
      for (std::string& why : lone_run_reasons(x->value("noise", nlohmann::json()))) {
        disturbed.push_back(fmt::format("point {}: {}", (*x)["point"].value("index", 0), why));
      }
    }
    const ComputeFactor& factor = factors.at(ranks_of(r));
    nlohmann::json p =
        validate_point(parts, r, *base, static_cast<size_t>(base - records.begin()) + 1, results,
                       network, factor.factor, out);
    p["compute_factor_spread"] = factor.spread;
    const double bound = spreads.bound(spread(*base), factor.spread);
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
// host was busy: other processes or the hypervisor took CPU time from a run it judges, or the
// host's speed changed under a run alone or a fixed memory stream; or a point's bound is over
// kWidestBound).
std::string verdict(const nlohmann::json& points, const std::vector<std::string>& disturbed) {
  if (!disturbed.empty()) return "inconclusive";
  const bool within = std::all_of(points.begin(), points.end(),
                                  [](const nlohmann::json& p) { return p["within"].get<bool>(); });
  return within ? "within" : "outside";
}

// `reasons` with each one once, where it first came.
void once_each(std::vector<std::string>& reasons) {
  std::set<std::string> seen;
  reasons.erase(std::remove_if(reasons.begin(), reasons.end(),
                               [&](const std::string& r) { return !seen.insert(r).second; }),
                reasons.end());
}

// Every point, the one-rank ones too, runs with the threads a rank has at the most ranks, so that
// a one-rank point calibrates a rank's compute.
int64_t threads_per_rank(const ValidateSimOptions& o) {
  const int64_t cores = usable_cpus();
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
    const auto reasons = validation["disturbed"].get<std::vector<std::string>>();
    fmt::print(
        "validate-sim: inconclusive: the errors cannot be judged ({} reason{}, kept in "
        "validation.json's \"disturbed\"):\n  {}\n",
        reasons.size(), reasons.size() == 1 ? "" : "s", fmt::join(reasons, "\n  "));
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
  fmt::print("validate-sim: {} threads a rank on the {} CPUs it may use\n", threads, usable_cpus());
  HostSteadiness steadiness;
  steadiness.measure("before the runs");
  BeforePoints before = measure_before(o, threads);
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
  const std::map<int64_t, ComputeFactor> factors = measure_after(o, before.coruns);
  steadiness.measure("after the runs");
  const Spreads spreads{
      pooled_spread(records, [](const nlohmann::json& r) { return ranks_of(r) > 1; }),
      pooled_spread(records, [](const nlohmann::json& r) { return ranks_of(r) == 1; })};
  std::vector<std::string> disturbed = before.coruns.disturbed;
  steadiness.add_reasons(disturbed);
  const nlohmann::json points =
      judge_points(o.parts, records, network, factors, spreads, results, sweep.out_dir, disturbed);
  once_each(disturbed);  // a baseline shared by several points once
  if (points.empty()) {
    fmt::print(stderr, "validate-sim: no measured multi-rank point had a one-rank baseline\n");
    return 1;
  }
  return finish({{"kind", "dlbench validate-sim"},
                 {"threads_per_rank", threads},
                 {"hardware_threads", std::thread::hardware_concurrency()},
                 {"usable_cpus", usable_cpus()},
                 {"network", o.out + "/network.json"},
                 {"corun", o.out + "/corun.json"},
                 {"host_steadiness", steadiness.json()},
                 {"results", results},
                 {"pooled_spread", spreads.multi},
                 {"pooled_one_rank_spread", spreads.one},
                 {"bound_rule",
                  "3 x sqrt(the multi-rank points' pooled CV^2 + the calibration's "
                  "CV^2 + the compute factor's CV^2 over its co-run rounds), the calibration's "
                  "at least the one-rank points' pooled"},
                 {"verdict", verdict(points, disturbed)},
                 {"disturbed", disturbed},
                 {"points", points}},
                o.out, sweep.out_dir);
}

}  // namespace dlb
