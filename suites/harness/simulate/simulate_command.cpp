#include "suites/harness/simulate/simulate_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <set>

#include "runtime/backend/backend.h"
#include "runtime/core/error.h"
#include "runtime/core/parse_number.h"
#include "runtime/core/stats.h"
#include "runtime/overlap/sync_schedule.h"
#include "runtime/sim/network.h"
#include "runtime/sim/simulator.h"
#include "runtime/trace/tracer.h"
#include "runtime/train/step_program.h"
#include "runtime/train/step_spec.h"
#include "runtime/train/straggler.h"
#include "suites/harness/core/environment.h"
#include "suites/harness/core/option_table.h"
#include "suites/harness/core/record.h"
#include "suites/harness/core/results.h"
#include "suites/harness/core/suite.h"
#include "suites/harness/simulate/calibrate.h"
#include "workloads/models/model.h"

namespace dlb {

namespace {

namespace fs = std::filesystem;

// A normal jitter's coefficient of variation, from "cv:X"; nullopt for any other text.
std::optional<double> normal_jitter_cv(const std::string& jitter) {
  if (jitter.rfind("cv:", 0) != 0) return std::nullopt;
  const std::optional<double> cv = parse_finite(std::string_view(jitter).substr(3));
  if (!cv || *cv < 0 || *cv > kMaxNormalJitterCv) return std::nullopt;
  return cv;
}

std::vector<double> jitter_factors(const std::string& jitter, const Calibration& c) {
  if (jitter == "measured") return c.jitter;
  if (jitter == "none") return {};
  if (const std::optional<double> cv = normal_jitter_cv(jitter)) return normal_jitter(*cv);
  throw InvalidArgument(fmt::format(
      "--jitter={}: expected measured, none, or cv:X (a normal spread of each rank's step with "
      "coefficient of variation X, from 0 to {})",
      jitter, kMaxNormalJitterCv));
}

// The jitter as records write it: measured, none, or cv:X with X as parsed (checked by
// jitter_factors first). A point's config keeps the one asked for (its id hashes it).
std::string jitter_text(const std::string& jitter) {
  const std::optional<double> cv = normal_jitter_cv(jitter);
  return cv ? fmt::format("cv:{}", *cv) : jitter;
}

// The jitter the replay applied, which the record's `simulation` says: a calibration with no
// measured steps (a roofline's) has no spread to draw from, so its "measured" jitter is none.
std::string applied_jitter_text(const std::string& jitter, const Calibration& c) {
  return jitter == "measured" && c.jitter.empty() ? "none" : jitter_text(jitter);
}

RankSpeeds parse_speeds(const SimulateCommandOptions& o, const Calibration& c) {
  RankSpeeds s;
  s.jitter = jitter_factors(o.jitter, c);
  if (!(o.compute_factor >= 1 && o.compute_factor <= 1e6)) {
    throw InvalidArgument(
        fmt::format("--compute-factor={}: how many times slower every rank computes: at least 1",
                    o.compute_factor));
  }
  s.compute_factor = o.compute_factor;
  if (o.straggler.empty()) return s;
  const std::optional<StragglerSpec> spec = parse_straggler(o.straggler);
  if (!spec) {
    throw InvalidArgument(fmt::format(
        "--straggler={}: expected RANK:FACTOR, a rank and how many times slower its compute is "
        "(e.g. 3:2)",
        o.straggler));
  }
  s.straggler = spec->rank;
  s.straggler_factor = spec->factor;
  const int64_t fewest = *std::min_element(o.ranks.begin(), o.ranks.end());
  if (s.straggler >= fewest) {
    throw InvalidArgument(fmt::format(
        "--straggler={}: rank {} is not among the {} ranks of the smallest point (ranks count "
        "from 0; give --ranks that all have it)",
        o.straggler, s.straggler, fewest));
  }
  if (!(s.straggler_factor >= 1) || s.straggler_factor > 1e6) {
    throw InvalidArgument(fmt::format(
        "--straggler={}: the factor is how many times slower the rank computes: at least 1",
        o.straggler));
  }
  return s;
}

// One point's step: its graph (declared as the calibrated run's) and the program a Trainer of
// that run would build from it (build_step), whose schedule and buckets the simulator replays.
struct SimStep {
  Graph graph;
  StepProgram program;
};

SimStep make_step(const Calibration& c, OverlapStrategy overlap, double bucket_mb, bool distributed,
                  const SyncMode& sync) {
  const auto precision = parse_precision(c.precision);
  const auto plan_kind = parse_memory_plan(c.memory_plan);
  const auto recompute = parse_recompute(c.recompute);
  if (!precision || !plan_kind || !recompute) {
    throw InvalidArgument(
        fmt::format("the calibration of {} names an unknown precision, memory "
                    "plan or recomputation: {}, {}, {}",
                    c.model, c.precision, c.memory_plan, c.recompute));
  }
  StepSpec spec;  // the step's rules, as a run's: a calibration file is input too
  spec.precision = *precision;
  spec.memory_plan = *plan_kind;
  spec.recompute = *recompute;
  spec.overlap = overlap;
  spec.bucket_mb = bucket_mb;
  // One rank of asynchronous SGD has no server to push to: its baseline is the plain step.
  spec.sync = distributed || sync.kind != SyncMode::Kind::kAsync ? sync : SyncMode{};
  spec.ranks = distributed ? 2 : 1;
  try {
    spec.validate();
  } catch (const Error& e) {
    throw InvalidArgument(
        fmt::format("the calibration of {} at batch {}: {}", c.model, c.batch, e.what()));
  }
  SimStep s{build_model(c.model, ModelConfig{c.batch, c.image_size, c.num_classes, {}}), {}};
  const PrecisionPolicy policy = PrecisionPolicy::for_precision(*precision);
  // Declared only: nothing is allocated. The activations' layout costs no time here; the CUDA
  // backend's max pooling keeps its argmax (a tensor the plan holds to the pool's backward).
  const bool argmax = parse_backend_kind(c.backend) == BackendKind::kCuda;
  BackendTraits traits;
  traits.fuses_batch_norm_relu = c.fused_relus;
  traits.fuses_conv_relu = c.fused_conv_relus;
  traits.saves_pool_argmax = argmax;
  s.graph.declare(policy, traits);
  // The CUDA backend's second input buffer changes no pass: the target is the plain one.
  s.program = build_step(s.graph, spec, StepTarget{});
  return s;
}

struct Point {
  OverlapStrategy overlap;
  double bucket_mb;
  int64_t ranks;
};

// The point as a suite would write it, and its id.
nlohmann::json point_config(const Calibration& c, const Network& n, const Point& p,
                            const SimulateCommandOptions& o) {
  nlohmann::json config = {
      {"model", c.model},
      {"batch", c.batch},
      {"image_size", c.image_size},
      {"precision", c.precision},
      {"backend", c.backend},
      {"ranks", p.ranks},
      {"overlap", std::string(overlap_name(p.overlap))},
      {"bucket_mb", p.bucket_mb},
      {"network", n.name},
      {"jitter", jitter_text(o.jitter)},
      {"straggler", o.straggler.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.straggler)},
      {"steps", o.steps},
      {"seed", o.seed}};
  // Only where it is not the default, as a suite writes it: a synchronous point keeps its id.
  if (!(o.sync == SyncMode{})) config["sync"] = sync_mode_name(o.sync);
  return config;
}

RunOptions run_options(const Calibration& c, const Point& p, const SimulateCommandOptions& o) {
  RunOptions r;
  r.model = c.model;
  r.batch = c.batch;
  r.image_size = c.image_size;
  r.num_classes = c.num_classes;
  r.precision = *parse_precision(c.precision);
  r.backend = parse_backend_kind(c.backend).value_or(BackendKind::kCpu);
  r.memory_plan = *parse_memory_plan(c.memory_plan);
  r.recompute = *parse_recompute(c.recompute);
  r.ranks = p.ranks;
  r.overlap = p.overlap;
  r.bucket_mb = p.bucket_mb;
  r.sync = o.sync;
  r.steps = o.steps;
  r.warmup = o.warmup;
  r.seed = o.seed;
  return r;
}

nlohmann::json loss_json(const ScalingLoss& l) {
  return {{"one_rank_step_s", l.one_rank_us / 1e6},
          {"step_s", l.step_us / 1e6},
          {"exposed_comm_s", l.exposed_comm_us / 1e6},
          {"waiting_for_slowest_s", l.waiting_for_slowest_us / 1e6},
          {"compute_slowdown_s", l.compute_slowdown_us / 1e6},
          {"rest_s", l.rest_us / 1e6}};
}

// Rank 0's last two timed iterations as a Chrome trace, in the lanes of a measured one. (Its
// timed iterations: every step's under the sync modes; under asynchronous SGD, its passes that
// began in the timed steps, whose first and last iterations may be partial.)
nlohmann::json simulated_trace(const SimStep& s, const Simulation& sim) {
  VirtualClock clock;
  const int64_t base = sim.timeline.empty() ? 0 : sim.timeline.front().iteration;
  const int64_t iterations = sim.timeline.empty() ? 0 : sim.timeline.back().iteration - base + 1;
  const int64_t first = std::max<int64_t>(iterations - 2, 0);
  Tracer tracer(first, iterations - first, &clock);
  double begin = 0;
  for (const TimedPass& t : sim.timeline) {
    if (t.iteration - base == first) {
      begin = t.start_us;
      break;
    }
  }
  clock.advance_us(begin);
  int64_t step = -1;
  for (const TimedPass& t : sim.timeline) {
    if (t.iteration - base < first) continue;
    if (t.iteration - base != step) {
      step = t.iteration - base;
      tracer.begin_step(step);
    }
    const Step& st = s.program.schedule.steps[t.index];
    const bool layer = st.node >= 0 && st.pass != Pass::kLoss;
    Span span{layer ? s.graph.nodes()[st.node].name : std::string(step_name(st)), step_name(st),
              t.lane};
    span.layer = layer;
    if (st.pass == Pass::kSync) span.bucket = traced_bucket(st);
    tracer.record(std::move(span), Mark{t.start_us, nullptr}, Mark{t.end_us, nullptr});
  }
  tracer.end_window();
  nlohmann::json trace = tracer.chrome_trace(0);
  trace["otherData"]["mode"] = "simulated";
  return trace;
}

// The `dlbench simulate` command that makes this point's record again (a simulated point is not a
// `dlbench run`): where its calibration came from, the network, the point, and every other
// option that differs from its default.
std::string simulate_command_text(const Calibration& c, const Point& p,
                                  const SimulateCommandOptions& o) {
  const SimulateCommandOptions defaults;
  std::string cmd = "dlbench simulate";
  const auto flag = [&cmd](const char* name, const std::string& value) {
    cmd += " " + shell_word(fmt::format("--{}={}", name, value));
  };
  if (!o.roofline.empty()) {
    flag("roofline", o.roofline);
    flag("image-size", std::to_string(c.image_size));
    flag("precision", c.precision);
    flag("model", c.model);
    flag("batch", std::to_string(c.batch));
  } else if (!o.from.empty()) {
    // The one calibration file --from wrote for this point (calibrate_results): --from with the
    // model and batch would take every calibration of them (each image size, precision...).
    flag("calibration", fmt::format("{}/calibration/{}.json", o.from, calibration_key(c)));
  } else {
    flag("calibration", o.calibration);
  }
  flag("network", o.network);
  flag("ranks", std::to_string(p.ranks));
  flag("overlap", std::string(overlap_name(p.overlap)));
  flag("bucket-mb", fmt::format("{}", p.bucket_mb));
  if (!(o.sync == defaults.sync)) flag("sync", sync_mode_name(o.sync));
  if (o.steps != defaults.steps) flag("steps", std::to_string(o.steps));
  if (o.warmup != defaults.warmup) flag("warmup", std::to_string(o.warmup));
  if (o.jitter != defaults.jitter) flag("jitter", o.jitter);
  if (!o.straggler.empty()) flag("straggler", o.straggler);
  if (o.compute_factor != defaults.compute_factor) {
    flag("compute-factor", fmt::format("{}", o.compute_factor));
  }
  if (o.seed != defaults.seed) flag("seed", std::to_string(o.seed));
  if (!o.traces) cmd += " --no-trace";
  if (!o.out.empty() || !o.from.empty()) flag("out", o.out.empty() ? o.from : o.out);
  return cmd;
}

// Each all-reduce the step's schedule launches, once, in launch order: its bucket ("all" for the
// whole buffer or a stale slot, laid out as it; "meeting" for independent ranks' token), bytes,
// and the network's fastest algorithm and time for it. Asynchronous SGD's messages are none.
nlohmann::json reductions_json(const SimStep& step, const Network& n, int64_t ranks) {
  nlohmann::json out = nlohmann::json::array();
  std::set<int> listed;
  for (const Step& s : step.program.schedule.steps) {
    if (s.pass != Pass::kSync || sync_pass_of(s) != SyncPass::kAllReduce) continue;
    const int b = reduced_buffer(s);
    if (!listed.insert(b).second) continue;
    const double bytes = reduction_bytes(step.graph, step.program.buckets, b);
    const CollectiveTime t = fastest_allreduce(n, bytes, ranks);
    out.push_back({{"bucket", b == kMeeting ? nlohmann::json("meeting")
                              : b < 0       ? nlohmann::json("all")
                                            : nlohmann::json(b)},
                   {"bytes", bytes},
                   {"algorithm", collective_name(t.algorithm)},
                   {"seconds", t.us / 1e6}});
  }
  return out;
}

nlohmann::json simulated_record(const Calibration& c, const Network& n, const Point& p,
                                const SimulateCommandOptions& o, const SimStep& step,
                                const Simulation& sim, size_t index, double wall_s) {
  RunResult r;
  r.options = run_options(c, p, o);
  r.mode = RunMode::kSimulated;
  r.ranks = static_cast<int>(p.ranks);
  r.backend_name = c.backend;
  r.params = step.graph.num_params();
  r.forward_flops_per_image = step.graph.forward_flops() / static_cast<double>(c.batch);
  r.flops_per_step = step.graph.training_flops();
  r.environment = c.source.value("environment", nlohmann::json::object());
  r.environment["time"] = utc_now_iso8601();
  RunStats stats;
  stats.timed_steps = o.steps;
  stats.images_per_step = c.batch * p.ranks;
  for (double us : sim.step_us) {
    stats.step_seconds.push_back(us / 1e6);
    stats.timed_seconds += us / 1e6;
  }
  r.stats = stats;
  r.buckets = static_cast<int64_t>(step.program.buckets.buckets.size());
  nlohmann::json record = record_json(r);
  const nlohmann::json config = point_config(c, n, p, o);
  record["command"] = simulate_command_text(c, p, o);
  record["suite"] = "simulate";
  record["suite_config"] = config;
  record["point"] = {{"index", index}, {"id", "sim-" + point_id(config)}};
  record["metrics"].erase("losses");
  record["metrics"]["scaling_loss"] = loss_json(sim.loss);
  // Against the simulated one-rank step of the same calibration: the model's own baseline.
  record["metrics"]["scaling_efficiency"] = sim.loss.one_rank_us / sim.mean_step_us;
  record["simulation"] = {
      {"network", network_json(n)},
      {"calibration", calibration_key(c)},
      {"calibration_source", c.source},
      {"device", c.device},
      {"jitter", applied_jitter_text(o.jitter, c)},
      {"straggler", config["straggler"]},
      {"compute_factor", o.compute_factor},
      {"replayed_ranks", sim.replayed_ranks},
      {"warmup_steps", o.warmup},
      {"wall_s", wall_s},
      {"reductions", p.ranks > 1 ? reductions_json(step, n, p.ranks) : nlohmann::json::array()}};
  return record;
}

// The calibrations `o` asks for: every one, or those of --model and --batch.
std::vector<Calibration> select_calibrations(const SimulateCommandOptions& o) {
  if (!o.roofline.empty()) {
    if (o.model.empty() || !o.batch) {
      throw InvalidArgument("simulate --roofline: give --model and --batch (per rank)");
    }
    return {roofline_calibration(load_device(o.roofline), o.model, *o.batch,
                                 o.image_size.value_or(224), o.precision)};
  }
  const std::vector<Calibration> all =
      o.from.empty() ? std::vector<Calibration>{read_calibration(o.calibration)}
                     : calibrate_results(o.from);
  std::vector<Calibration> out;
  std::vector<std::string> names;
  for (const Calibration& c : all) {
    names.push_back(fmt::format("{} at batch {}", c.model, c.batch));
    if ((o.model.empty() || c.model == o.model) && (!o.batch || c.batch == *o.batch)) {
      out.push_back(c);
    }
  }
  if (out.empty()) {
    throw InvalidArgument(fmt::format(
        "no calibration of {} at batch {} in {}: it calibrates {}",
        o.model.empty() ? "any model" : o.model, o.batch ? std::to_string(*o.batch) : "any",
        o.from.empty() ? o.calibration : o.from, fmt::join(names, ", ")));
  }
  return out;
}

void print_point(const nlohmann::json& record) {
  const auto& m = record["metrics"];
  const auto& l = m["scaling_loss"];
  const auto& c = record["suite_config"];
  fmt::print(
      "  {:>5} ranks  {:<8} {:>5.0f} MB  {:>10.1f} img/s  {:>5.1f}%  step {:.4f} s: exposed comm "
      "{:.4f}, slowest rank {:.4f}, slowdown {:.4f}, rest {:.4f}\n",
      c["ranks"].get<int64_t>(), c["overlap"].get<std::string>(), c["bucket_mb"].get<double>(),
      m["throughput_img_s"].get<double>(), 100 * m["scaling_efficiency"].get<double>(),
      l["step_s"].get<double>(), l["exposed_comm_s"].get<double>(),
      l["waiting_for_slowest_s"].get<double>(), l["compute_slowdown_s"].get<double>(),
      l["rest_s"].get<double>());
}

}  // namespace

namespace {

// The traces a simulate run has written: removed if the run is refused before its records are
// appended, so that a refusal leaves the folder as it was.
struct WrittenTraces {
  std::vector<std::string> paths;
  bool keep = false;
  ~WrittenTraces() {
    if (keep) return;
    std::error_code ignored;
    for (const std::string& p : paths) fs::remove(p, ignored);
  }
};

// `c` on `network` at every point of `o`, indexed from `index` + 1: the records, none appended.
// Each is checked as a reader would check it (schema, every number finite), so that a calibration
// or a network that makes a number overflow is refused before any record of the run is appended.
// Traces are written as they are made (a trace is large; the records are held).
std::vector<nlohmann::json> simulate_points(const Calibration& c, const Network& network,
                                            const SimulateCommandOptions& o, const std::string& out,
                                            size_t index, WrittenTraces& traces) {
  const RankSpeeds speeds = parse_speeds(o, c);
  if (o.traces) fs::create_directories(out + "/traces");
  std::vector<nlohmann::json> points;
  for (OverlapStrategy overlap : o.overlaps) {
    for (double bucket_mb : o.bucket_mb) {
      const SimStep one = make_step(c, overlap, bucket_mb, false, o.sync);
      const SimStep many = make_step(c, overlap, bucket_mb, true, o.sync);
      for (int64_t ranks : o.ranks) {
        const Point p{overlap, bucket_mb, ranks};
        const SimStep& step = ranks > 1 ? many : one;
        SimulateOptions so;
        so.ranks = ranks;
        so.warmup = o.warmup;
        so.iterations = o.steps;
        so.seed = o.seed;
        so.speeds = speeds;
        so.comm_sharing = reduction_sharing(step.graph, step.program.buckets, network, ranks);
        if (o.sync.kind == SyncMode::Kind::kAsync) so.server = server_costs(c, step.graph, network);
        const auto began = std::chrono::steady_clock::now();
        const Simulation sim =
            simulate(step.program.schedule, one.program.schedule,
                     calibrated_cost(c, step.graph, step.program.buckets, network, ranks), so);
        const double wall_s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
        nlohmann::json record = simulated_record(c, network, p, o, step, sim, ++index, wall_s);
        if (o.traces) {
          const std::string trace =
              fmt::format("{}/traces/{}.trace.json", out, record["point"]["id"].get<std::string>());
          write_json_atomically(trace, simulated_trace(step, sim));
          traces.paths.push_back(trace);
          record["paths"] = {{"trace", trace}};
        }
        check_record(record,
                     fmt::format("simulate --network={}: {} at {} ranks, {}, --bucket-mb={}",
                                 o.network, c.model, ranks, overlap_name(overlap), bucket_mb));
        points.push_back(std::move(record));
      }
    }
  }
  return points;
}

// The records appended to `out`/results.jsonl, in order, each printed.
void append_points(const std::vector<nlohmann::json>& records, const std::string& out) {
  fs::create_directories(out);
  for (const nlohmann::json& r : records) {
    append_jsonl(out + "/results.jsonl", r);
    print_point(r);
  }
}

void print_heading(const Calibration& c, const Network& network) {
  fmt::print("{} batch {} ({}px, {}, {}) on {}, calibrated on {}:\n", c.model, c.batch,
             c.image_size, c.precision, c.backend, network.name, c.device);
}

}  // namespace

std::vector<nlohmann::json> simulate_calibration(const Calibration& c, const Network& network,
                                                 const SimulateCommandOptions& o,
                                                 const std::string& out) {
  const size_t index = read_results(out + "/results.jsonl").size();
  WrittenTraces traces;
  std::vector<nlohmann::json> records = simulate_points(c, network, o, out, index, traces);
  traces.keep = true;
  print_heading(c, network);
  append_points(records, out);
  return records;
}

nlohmann::json simulate_measured_point(const nlohmann::json& point, const nlohmann::json& base,
                                       const std::string& base_where, const Network& network,
                                       double compute_factor, const std::string& out) {
  const Calibration c = calibration_from_record(base, out, base_where);
  SimulateCommandOptions so;
  // What a record's command names to make it again: the calibration, as a file, and the measured
  // network (both written before the simulation).
  so.calibration = fmt::format("{}/calibration/{}.json", out, calibration_key(c));
  fs::create_directories(out + "/calibration");
  write_json_atomically(so.calibration, calibration_json(c));
  so.network = fs::path(out).parent_path().string() + "/network.json";
  so.out = out;
  so.ranks = {point["config"]["ranks"].get<int64_t>()};
  so.overlaps = {*parse_overlap(point["config"]["overlap"].get<std::string>())};
  so.bucket_mb = {point["config"]["bucket_mb"].get<double>()};
  so.steps = 50;
  so.compute_factor = compute_factor;
  return simulate_calibration(c, network, so, out).front();
}

// The options' own checks, before a network or calibration is read.
void check_simulate_options(const SimulateCommandOptions& o) {
  if (static_cast<int>(!o.from.empty()) + static_cast<int>(!o.calibration.empty()) +
          static_cast<int>(!o.roofline.empty()) !=
      1) {
    throw InvalidArgument(
        "simulate: give one of --from=RESULTS_DIR, --calibration=FILE or --roofline=DEVICE");
  }
  for (int64_t n : o.ranks) {
    if (n < 1 || n > kMaxSimulatedRanks) {
      throw InvalidArgument(
          fmt::format("simulate: --ranks must be in [1, {}], got {}", kMaxSimulatedRanks, n));
    }
  }
  if (o.steps < 1 || o.steps > 100000 || o.warmup < 0 || o.warmup > 10000) {
    throw InvalidArgument("simulate: --steps must be in [1, 100000] and --warmup in [0, 10000]");
  }
  if (o.ranks.empty() || o.overlaps.empty() || o.bucket_mb.empty()) {
    throw InvalidArgument("simulate: --ranks, --overlap and --bucket-mb each need a value");
  }
  for (OverlapStrategy overlap : o.overlaps) {
    for (int64_t n : o.ranks) {
      StepSpec spec;  // the sync mode's rules are the spec's, with its words
      spec.sync = o.sync;
      spec.overlap = overlap;
      spec.ranks = n;
      spec.validate();
      if (o.sync.kind == SyncMode::Kind::kAsync && n > kMaxAsyncRanks) {
        throw InvalidArgument(
            fmt::format("simulate --sync=async: every rank is replayed, at most {}; got --ranks={}",
                        kMaxAsyncRanks, n));
      }
    }
  }
  if (!o.from.empty() && !fs::is_directory(o.from)) {
    throw InvalidArgument(fmt::format("--from: '{}' is not a results folder", o.from));
  }
}

int simulate_command(const SimulateCommandOptions& o) {
  check_simulate_options(o);
  const Network network = load_network(o.network);
  const std::vector<Calibration> calibrations = select_calibrations(o);
  // Everything that can be refused is refused before the first record is written: each
  // calibration's speeds, its model's steps, and its fit to them.
  for (const Calibration& c : calibrations) {
    parse_speeds(o, c);
    if (c.batch > (int64_t{1} << 40) / kMaxSimulatedRanks) {
      throw InvalidArgument(fmt::format("the calibration's batch {} is too large", c.batch));
    }
    for (OverlapStrategy overlap : o.overlaps) {
      for (double bucket_mb : o.bucket_mb) {
        const SimStep step = make_step(c, overlap, bucket_mb, true, o.sync);
        calibrated_cost(c, step.graph, step.program.buckets, network, 2);
        if (o.sync.kind == SyncMode::Kind::kAsync) server_costs(c, step.graph, network);
      }
    }
  }
  const std::string out = !o.out.empty() ? o.out : !o.from.empty() ? o.from : ".";
  const std::string results = out + "/results.jsonl";
  // Every point of every calibration simulated and checked, then written: a refusal appends none.
  size_t index = read_results(results).size();
  WrittenTraces traces;  // removed unless every point passes its check
  std::vector<std::vector<nlohmann::json>> all;
  for (const Calibration& c : calibrations) {
    all.push_back(simulate_points(c, network, o, out, index, traces));
    index += all.back().size();
  }
  traces.keep = true;
  for (size_t i = 0; i < calibrations.size(); ++i) {
    print_heading(calibrations[i], network);
    append_points(all[i], out);
  }
  fmt::print("records appended to {}\n", results);
  return 0;
}

}  // namespace dlb

namespace dlb {

namespace {

// A suite's `simulate` block as simulate_command's options (the schema has checked its types).
SimulateCommandOptions block_options(const nlohmann::json& block, const std::string& out) {
  SimulateCommandOptions o;
  o.from = out;
  o.ranks = block["ranks"].get<std::vector<int64_t>>();
  if (block.contains("overlap")) {
    o.overlaps.clear();
    for (const auto& name : block["overlap"]) {
      o.overlaps.push_back(*parse_overlap(name.get<std::string>()));  // the schema's enum
    }
  }
  if (block.contains("bucket_mb")) o.bucket_mb = block["bucket_mb"].get<std::vector<double>>();
  o.jitter = block.value("jitter", o.jitter);
  o.steps = block.value("steps", o.steps);
  o.straggler = block.value("straggler", "");
  return o;
}

}  // namespace

void check_simulate_block(const nlohmann::json& block, const std::string& where) {
  try {
    const SimulateCommandOptions o = block_options(block, "");
    parse_speeds(o, Calibration{});  // the jitter, the straggler
    if (block.contains("model")) {
      const ModelInfo& model = find_model(block["model"].get<std::string>());
      if (block.contains("image_size")) check_image_size(model, block["image_size"].get<int64_t>());
    }
    for (const auto& name : block["networks"]) {
      const Network network = load_network(name.get<std::string>());
      if (!network.device.empty()) load_device(network.device);
      if (block.value("calibration", "auto") == "roofline" && network.device.empty()) {
        throw InvalidArgument(fmt::format(
            "calibration roofline: network '{}' names no device (its \"device\" key) whose "
            "roofline would calibrate",
            network.name));
      }
    }
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{}: simulate: {}", where, e.what()));
  }
}

namespace {

// Whether a calibration measured on `measured_device` ("cpu: AMD EPYC 7B13", "NVIDIA H100 80GB
// HBM3") ran on the device a device file names ("NVIDIA H100 80GB HBM3 (SXM5)"): that name, less
// its parenthesised form factor, within the measured one.
bool same_device(const std::string& measured_device, const std::string& device_name) {
  const std::string name = device_name.substr(0, device_name.find(" ("));
  return !name.empty() && measured_device.find(name) != std::string::npos;
}

// Whether `block` simulates `network` from the roofline of the network's device rather than from
// the suite's measured one-rank points: where it says so, or (calibration auto, the default)
// where the network names a device and a point was measured on another one. A CPU's compute on a
// DGX's network is no machine anyone owns.
bool roofline_block(const nlohmann::json& block, const Network& network,
                    const std::vector<Calibration>& measured, const DeviceFile& device) {
  const std::string mode = block.value("calibration", "auto");
  if (mode != "auto" || network.device.empty()) return mode == "roofline";
  return std::any_of(measured.begin(), measured.end(),
                     [&](const Calibration& c) { return !same_device(c.device, device.device); });
}

// The configurations the roofline calibrates: each measured one's model, batch, image size and
// precision, with what the block sets in their place (its `model`, `batch`, `image_size`,
// `precision`), each once.
std::vector<Calibration> roofline_configs(const nlohmann::json& block,
                                          const std::vector<Calibration>& measured) {
  std::vector<Calibration> out;
  for (Calibration c : measured) {
    c.model = block.value("model", c.model);
    c.batch = block.value("batch", c.batch);
    c.image_size = block.value("image_size", c.image_size);
    c.precision = block.value("precision", c.precision);
    const bool seen = std::any_of(out.begin(), out.end(), [&](const Calibration& o) {
      return o.model == c.model && o.batch == c.batch && o.image_size == c.image_size &&
             o.precision == c.precision;
    });
    if (!seen) out.push_back(c);
  }
  return out;
}

// One network of a simulate block: from the measured points, or each configuration on the
// roofline of the network's device.
void simulate_block_network(const nlohmann::json& block, SimulateCommandOptions o,
                            const std::string& out) {
  const Network network = load_network(o.network);
  // A roofline of one configuration the block names whole needs no measured point.
  const bool whole = block.value("calibration", "auto") == "roofline" && block.contains("model") &&
                     block.contains("batch") && block.contains("image_size") &&
                     block.contains("precision");
  const std::vector<Calibration> measured =
      whole ? std::vector<Calibration>{Calibration{}} : calibrate_results(out);
  const DeviceFile device = network.device.empty() ? DeviceFile{} : load_device(network.device);
  if (!roofline_block(block, network, measured, device)) {
    fmt::print("simulate on {} (compute: this suite's measured one-rank points):\n", o.network);
    simulate_command(o);
    return;
  }
  fmt::print("simulate on {} (compute: the roofline of {}, {}):\n", o.network, network.device,
             device.device);
  o.from.clear();
  o.out = out;
  o.roofline = network.device;
  for (const Calibration& c : roofline_configs(block, measured)) {
    o.model = c.model;
    o.batch = c.batch;
    o.image_size = c.image_size;
    o.precision = c.precision;
    simulate_command(o);
  }
}

}  // namespace

bool simulate_suite_block(const nlohmann::json& block, const std::string& out) {
  try {
    SimulateCommandOptions o = block_options(block, out);
    for (const auto& network : block["networks"]) {
      o.network = network.get<std::string>();
      simulate_block_network(block, o, out);
    }
    return true;
  } catch (const Error& e) {
    fmt::print("simulate: not done: {}\n", e.what());
    return false;
  }
}

}  // namespace dlb
