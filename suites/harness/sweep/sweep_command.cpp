#include "suites/harness/sweep/sweep_command.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>

#include "runtime/backend/backend.h"
#include "runtime/core/clock.h"
#include "runtime/core/error.h"
#include "runtime/io/json_text.h"
#include "runtime/io/text_file.h"
#include "suites/harness/core/machine_peak.h"
#include "suites/harness/core/measured_loss.h"
#include "suites/harness/core/option_table.h"
#include "suites/harness/core/peers.h"
#include "suites/harness/core/point_file.h"
#include "suites/harness/core/record.h"
#include "suites/harness/core/report_hook.h"
#include "suites/harness/core/results.h"
#include "suites/harness/core/suite.h"
#include "suites/harness/sweep/suite_images.h"
#include "workloads/models/model.h"

namespace dlb {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string clock_text(double s) {
  const int64_t t = static_cast<int64_t>(s + 0.5);
  return fmt::format("{:02}:{:02}", t / 60, t % 60);
}

// Every file of point `index` is named from this: "<index>-<id>".
std::string point_stem(int64_t index, const nlohmann::json& config) {
  return fmt::format("{}-{}", index, point_id(config));
}

// "ranks=2 overlap=none" from the point's values of the suite's axes.
std::string describe(const Suite& suite, const json& config) {
  std::string out;
  std::vector<std::string> keys;
  for (const auto& [key, _] : suite.axes) keys.push_back(key);
  for (const auto& c : suite.cases) {
    for (const auto& [key, _] : c.items()) {
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    }
  }
  for (const auto& key : keys) {
    if (!config.contains(key)) continue;
    if (!out.empty()) out += ' ';
    const json& v = config[key];
    out += key + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
  }
  return out.empty() ? "(defaults)" : out;
}

// A record for a point the worker did not record: its config as the suite wrote it.
json harness_record(RunStatus status, const std::string& message, const json& config) {
  RunOptions o;
  bool parsed = true;
  try {
    o = options_from_json(config);
  } catch (const InvalidArgument&) {
    parsed = false;  // the defaults, and the suite's keys as written
  }
  json record = record_json(failed_run(o, status, message));
  if (!parsed) {
    record["config"].update(config);
    record.erase("command");  // the defaults' command is not this point's
  }
  return record;
}

// The point's record: the one its worker wrote (failures included), or, when there is none or
// the job failed after writing it, what the harness saw of the process.
json point_record(const ProcessResult& pr, const std::string& record_file, const json& config,
                  double timeout_s) {
  const std::string ended =
      pr.timed_out
          ? fmt::format("no result within --timeout={} s; its process group was killed", timeout_s)
      : pr.signal ? fmt::format("killed by signal {} ({})", pr.signal, strsignal(pr.signal))
                  : fmt::format("worker exited with code {}", pr.exit_code);
  const bool clean = !pr.timed_out && pr.signal == 0 && pr.exit_code == 0;
  if (path_exists(record_file)) {
    json record;
    try {
      record = parse_json(read_text_file(record_file, "record"), record_file);
    } catch (const InvalidArgument&) {
      record = nullptr;
    }
    if (!record.is_object() || !record.contains("status") || !record["status"].is_string()) {
      return harness_record(RunStatus::kFailed,
                            fmt::format("{}: the worker's record is not valid JSON", record_file),
                            config);
    }
    if (record["status"] != "ok" || clean) return record;
    return harness_record(RunStatus::kFailed, "rank 0 wrote its record, but then: " + ended,
                          config);
  }
  if (pr.timed_out) return harness_record(RunStatus::kTimeout, ended, config);
  if (pr.signal) return harness_record(RunStatus::kCrashed, ended, config);
  return harness_record(RunStatus::kFailed, ended + " without writing its record", config);
}

// --inject-fault=KIND@I: point I's worker injects the fault (a crash, hang or oom of the whole
// point; the rank faults are a run's own, --inject-fault of `dlbench run`).
struct Fault {
  InjectedFault kind = InjectedFault::kNone;
  int64_t index = 0;
};

Fault parse_fault(const std::string& spec) {
  if (spec.empty()) return {};
  const size_t at = spec.find('@');
  const auto kind = parse_fault_name(spec.substr(0, at));
  Fault f{kind.value_or(InjectedFault::kNone), 0};
  if (at != std::string::npos) f.index = std::atoll(spec.c_str() + at + 1);
  const bool whole_point = f.kind == InjectedFault::kCrash || f.kind == InjectedFault::kHang ||
                           f.kind == InjectedFault::kOom;
  if (!whole_point || f.index < 1) {
    throw InvalidArgument(
        fmt::format("--inject-fault={}: expected crash@I, hang@I or oom@I", spec));
  }
  return f;
}

// The system a record's point names ("dlbench" when its suite has no system axis).
std::string system_of(const json& record) {
  return record["suite_config"].value("system", std::string(system_name(System::kDlbench)));
}

// dlbench's throughput over `peer`'s on the same point (the suite config but for its system),
// when both ended ok; for dlbench's record of that point.
std::optional<double> ratio_to_peer(const json& record, const std::string& peer,
                                    const std::vector<json>& records) {
  if (record["status"] != "ok" || system_of(record) != system_name(System::kDlbench)) return {};
  json want = record["suite_config"];
  want["system"] = peer;
  for (const auto& r : records) {
    if (r["status"] == "ok" && r["suite_config"] == want) {
      const double p = r["metrics"]["throughput_img_s"].get<double>();
      if (p > 0) return record["metrics"]["throughput_img_s"].get<double>() / p;
    }
  }
  return {};
}

// One record's row of the summary, printed, and its entry in summary.json.
json summary_row(const Suite& suite, const json& r, const std::vector<std::string>& peers,
                 const std::vector<json>& records, size_t width) {
  json entry = {{"index", r["point"]["index"]},
                {"id", r["point"]["id"]},
                {"config", r["suite_config"]},
                {"status", r["status"]}};
  std::string thr = "-", eff = "-", mem = "-", ratios;
  if (r["status"] == "ok") {
    const double t = r["metrics"]["throughput_img_s"].get<double>();
    thr = fmt::format("{:.2f}", t);
    entry["throughput_img_s"] = t;
    if (r["metrics"].contains("scaling_efficiency")) {
      const double e = r["metrics"]["scaling_efficiency"].get<double>();
      eff = fmt::format("{:.1f}%", 100 * e);
      entry["scaling_efficiency"] = e;
    }
    if (r.contains("memory")) {  // a peer on the CPU has no allocator to ask
      const double peak = r["memory"]["peak_bytes_total"].get<double>();
      mem = fmt::format("{:.1f}", peak / (1024.0 * 1024));
      entry["peak_bytes_total"] = peak;
    }
  } else {
    entry["message"] = r.value("message", "");
  }
  for (const auto& p : peers) {
    const std::optional<double> ratio = ratio_to_peer(r, p, records);
    ratios += fmt::format(" {:>12}", ratio ? fmt::format("{:.2f}x", *ratio) : "-");
    if (ratio) entry["throughput_ratio_to"][p] = *ratio;
  }
  const std::string status = r["status"] == "ok"
                                 ? "ok"
                                 : fmt::format("{}: {}", r["status"].get<std::string>(),
                                               r.value("message", "").substr(0, 70));
  fmt::print("{:>4}  {:<{}} {:>12} {:>11} {:>10}{}  {}\n", r["point"]["index"].get<int64_t>(),
             describe(suite, r["suite_config"]), width, thr, eff, mem, ratios, status);
  return entry;
}

// The peer systems with a record, each a ratio column.
std::vector<std::string> peers_of(const std::vector<json>& records) {
  std::vector<std::string> peers;
  for (const auto& r : records) {
    const std::string sys = system_of(r);
    if (sys != system_name(System::kDlbench) &&
        std::find(peers.begin(), peers.end(), sys) == peers.end()) {
      peers.push_back(sys);
    }
  }
  return peers;
}

void print_summary(const Suite& suite, const std::vector<json>& records, const std::string& out) {
  const std::vector<std::string> peers = peers_of(records);
  size_t width = 5;  // the point column fits the longest description
  for (const auto& r : records) width = std::max(width, describe(suite, r["suite_config"]).size());
  std::string ratio_header;
  for (const auto& p : peers) ratio_header += fmt::format(" {:>12}", "vs " + p);
  fmt::print("\n{:>4}  {:<{}} {:>12} {:>11} {:>10}{}  {}\n", "#", "point", width, "images/s",
             "efficiency", "peak MiB", ratio_header, "status");
  json points = json::array();
  std::map<std::string, int> counts;
  for (const auto& r : records) {
    points.push_back(summary_row(suite, r, peers, records, width));
    ++counts[r["status"].get<std::string>()];
  }
  std::string count_text;
  for (const auto& [k, v] : counts)
    count_text += fmt::format("{}{} {}", count_text.empty() ? "" : ", ", v, k);
  fmt::print("{} points: {}. Records: {}/results.jsonl\n", records.size(), count_text, out);
  if (!peers.empty()) {
    fmt::print("vs PEER: dlbench's images/s over the peer's on the same point, same run\n");
  }
  write_json_atomically(out + "/summary.json", {{"suite", suite.name},
                                                {"suite_file", suite.path},
                                                {"description", suite.description},
                                                {"cpu_override", suite.cpu_override_applied},
                                                {"counts", counts},
                                                {"points", points}});
}

// Before the first of the points to run, this host's CPU peak when none is kept and one of them
// is dlbench's on the CPU of this host (machine_peak.h): every CPU record then says its fraction
// of it, and the reports its MFU. Points that srun places (possibly on other hosts) are not
// measured for. A peak that cannot be measured or kept costs the records their fraction, never
// the sweep.
void measure_cpu_peak_once(const SweepOptions& opt, const std::vector<json>& to_run) {
  if (opt.launcher == LauncherKind::kSrun || this_host().in_slurm) return;
  const bool cpu = std::any_of(to_run.begin(), to_run.end(), [](const json& c) {
    if (c.value("system", std::string(system_name(System::kDlbench))) !=
        system_name(System::kDlbench)) {
      return false;
    }
    try {
      return options_from_json(c).backend == BackendKind::kCpu;  // the option table's default
    } catch (const Error&) {
      return false;  // a point that does not parse fails on its own
    }
  });
  if (!cpu) return;
  const std::string path = peak_file_path();
  try {
    for (const MachinePeak& peak : ensure_cpu_peaks(path)) {
      fmt::print(
          "measured this CPU's {} peak once ({} threads): {:.1f} GFLOP/s, {:.1f} GB/s, kept in "
          "{} (dlbench bench peak measures it again)\n",
          peak.precision, peak.threads, peak.flops_per_s / 1e9, peak.bytes_per_s / 1e9, path);
      std::fflush(stdout);
    }
  } catch (const Error& e) {
    fmt::print(stderr, "dlbench: no CPU peak, so no fraction of it in the records: {}\n", e.what());
  }
}

// Every config key of a point, with the batch, image size and classes a run would resolve: what a
// peer reads, so that it trains what dlbench would.
json resolved_config(const RunOptions& o) {
  RunOptions r = o;
  const ModelInfo& info = find_model(o.model);
  r.batch = o.batch.value_or(kDefaultBatch);
  r.image_size = o.image_size.value_or(info.default_image_size);
  r.num_classes = o.num_classes.value_or(info.default_classes);
  return config_json(r);
}

// --dry-run: each point's launch command, or why it cannot run. Returns how many cannot.
size_t print_dry_run(const SweepOptions& opt, const Suite& suite, const std::vector<json>& points,
                     const std::string& out) {
  size_t not_runnable = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    RunOptions o;
    try {
      o = options_from_json(points[i]);
    } catch (const InvalidArgument& e) {
      fmt::print("  [{}] {}  {}: not runnable: {}\n", i + 1, describe(suite, points[i]),
                 point_id(points[i]), e.what());
      ++not_runnable;
      continue;
    }
    const std::string point_file = out + "/points/" + point_stem(i + 1, points[i]) + ".json";
    std::vector<std::string> argv{self_executable(), "worker", "--point=" + point_file};
    if (o.system != System::kDlbench) {
      try {
        argv = peer_argv(o.system, point_file);
      } catch (const Unsupported& e) {  // recorded as unsupported; the sweep goes on
        fmt::print("  [{}] {}  {}: unsupported here: {}\n", i + 1, describe(suite, points[i]),
                   point_id(points[i]), e.what());
        continue;
      }
    }
    const auto cmd = launch_command_here(opt.launcher, o.ranks, argv);
    fmt::print("  [{}] {}  {}: {}\n", i + 1, describe(suite, points[i]), point_id(points[i]),
               fmt::join(cmd.argv, " "));
  }
  return not_runnable;
}

// One point, from its config to its record: the worker is launched with a point file naming
// where it writes its record, trace, profile and log.
class PointRunner {
 public:
  PointRunner(const SweepOptions& opt, const Suite& suite, std::string out, Fault fault,
              size_t total, std::string images)
      : opt_(opt),
        suite_(suite),
        out_(std::move(out)),
        fault_(std::move(fault)),
        total_(total),
        images_(std::move(images)) {}

  // A config that does not parse or go together, or ranks the launcher cannot start, is this
  // point's failure; the sweep goes on.
  json run(int64_t index, const json& config, const std::string& label) {
    try {
      return launch(index, config, label);
    } catch (const Error& e) {
      return harness_record(status_for(e.kind()), e.what(), config);
    }
  }

  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }
  bool tty() const { return tty_; }

 private:
  json launch(int64_t index, const json& config, const std::string& label) {
    RunOptions o = options_from_json(config);
    o.data_path = data_path_of(o.data, images_);
    validate_run_options(o);
    const bool peer = o.system != System::kDlbench;
    const std::string stem = point_stem(index, config);
    const std::string point_file = out_ + "/points/" + stem + ".json";
    const std::string record_file = out_ + "/points/" + stem + ".record.json";
    const std::string log_file = out_ + "/logs/" + stem + ".log";
    const bool digits = o.data == DataSource::kDigits;
    if (digits) {
      std::error_code ec;
      fs::create_directories(out_ + "/mllog", ec);
      if (ec) throw IoError(fmt::format("cannot create '{}/mllog': {}", out_, ec.message()));
    }
    write_json_atomically(
        point_file, {{"suite", suite_.name},
                     {"index", index},
                     {"id", point_id(config)},
                     {"config", config},
                     {"record", record_file},
                     {"trace_steps", std::min(opt_.trace_steps, o.steps)},
                     {"trace", out_ + "/traces/" + stem + ".trace.json"},
                     {"profile", std::min(opt_.trace_steps, o.steps) > 0
                                     ? out_ + "/profiles/" + stem + ".profile.json"
                                     : std::string()},
                     {"mllog", digits ? out_ + "/mllog/" + stem + ".mllog" : std::string()},
                     {"suite_file", suite_.path},
                     {"fault", fault_.index == index ? std::string(fault_name(fault_.kind)) : ""},
                     {"data_path", o.data_path},
                     {"resolved", resolved_config(o)}});
    std::error_code ignored;  // a record left from an earlier run; its absence is fine
    fs::remove(record_file, ignored);
    const std::vector<std::string> worker =
        peer ? peer_argv(o.system, point_file)
             : std::vector<std::string>{self_executable(), "worker", "--point=" + point_file};
    LaunchCommand cmd = launch_command_here(opt_.launcher, o.ranks, worker);
    if (peer) add_peer_rendezvous(cmd, this_host());
    const ProcessResult pr = run_process(cmd, opt_.timeout_s, log_file, progress(index, label));
    ++launched_;
    launched_seconds_ += pr.seconds;
    json record = point_record(pr, record_file, config, opt_.timeout_s);
    // Run again by hand, the point needs the launcher's placement and environment too.
    if (!peer && record.contains("command") && record["command"].is_string()) {
      LaunchCommand as_run = cmd;  // with the user's own OMP_NUM_THREADS, which it inherited
      if (const char* t = std::getenv("OMP_NUM_THREADS")) as_run.env.emplace("OMP_NUM_THREADS", t);
      record["command"] = as_launched(record["command"], as_run, worker.size());
    }
    if (record["status"] != "ok") record["stderr_tail"] = tail_of_file(log_file, 4000);
    return record;
  }

  // The running point's line on a terminal: its time, the sweep's, and the ETA.
  std::function<void(double)> progress(int64_t index, const std::string& label) const {
    const double eta_each = launched_ ? launched_seconds_ / launched_ : 0;
    const size_t left_points = total_ - static_cast<size_t>(index) + 1;
    return [this, eta_each, left_points, label](double elapsed_s) {
      if (!tty_) return;
      const double left = eta_each * static_cast<double>(left_points) - elapsed_s;
      fmt::print("\r\033[K{}  running {}  elapsed {}  ETA {}", label, clock_text(elapsed_s),
                 clock_text(elapsed()), eta_each > 0 ? clock_text(std::max(left, 0.0)) : "--:--");
      std::fflush(stdout);
    };
  }

  const SweepOptions& opt_;
  const Suite& suite_;
  const std::string out_;
  const Fault fault_;
  const size_t total_;
  const std::string images_;  // the image points' data (suite_images.h)
  const bool tty_ = isatty(STDOUT_FILENO);
  const std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  double launched_seconds_ = 0;
  int64_t launched_ = 0;
};

// Latest record per point among `records`, in the suite's point order.
std::vector<json> latest_records(const std::vector<json>& records,
                                 const std::vector<json>& points) {
  std::map<std::string, json> latest;
  for (const auto& r : records) latest[r["point"]["id"].get<std::string>()] = r;
  std::vector<json> ordered;
  for (const auto& p : points) {
    auto it = latest.find(point_id(p));
    if (it != latest.end()) ordered.push_back(it->second);
  }
  return ordered;
}

// The records a resumed sweep starts from. Every whole line is checked as the reports check it
// first; only then is a torn last line (a crash mid-write) moved aside, so a refused resume
// changes no file.
std::vector<json> resumed_records(const std::string& results) {
  if (!path_exists(results)) return {};
  const std::string text = read_text_file(results, "results file");
  const size_t newline = text.rfind('\n');
  const size_t whole = newline == std::string::npos ? 0 : newline + 1;
  std::vector<json> records;
  try {
    records = parse_results(std::string_view(text).substr(0, whole), results);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(
        fmt::format("--resume: {} (nothing was run or changed; move the file aside, or start a "
                    "new --out)",
                    e.what()));
  }
  if (const std::string torn = set_aside_torn_tail(results, text); !torn.empty()) {
    fmt::print(stderr,
               "dlbench: {} ended in a record cut short (a crash while writing it); its bytes "
               "are moved to {}, and its point runs again\n",
               results, torn);
  }
  return records;
}

}  // namespace

namespace {

// Where a sweep writes: refused where results are there and it does not resume; its folders
// made. The records it resumes from.
std::vector<json> prepare_output(const SweepOptions& opt, const std::string& out,
                                 const std::string& results) {
  if (path_exists(results) && !opt.resume) {
    throw InvalidArgument(
        fmt::format("{} already holds results; pass --resume to continue that "
                    "sweep, or --out=DIR for a new one",
                    out));
  }
  std::vector<json> previous = opt.resume ? resumed_records(results) : std::vector<json>{};
  for (const char* sub : {"points", "traces", "profiles", "logs"}) {
    std::error_code ec;
    fs::create_directories(out + "/" + sub, ec);
    if (ec) {
      throw IoError(
          fmt::format("cannot create the output directory '{}/{}': {}", out, sub, ec.message()));
    }
  }
  return previous;
}

// A point's record as it is appended: placed in the suite, checked as the reports read it (a
// record that is not one becomes the harness's record of the point's failure), and given the
// metrics that compare it with the points before it (`recorded`, which it joins).
json finished_record(json record, const std::string& suite_name, const json& config,
                     const json& point, std::vector<json>& recorded, const std::string& out) {
  const std::string where = fmt::format("the record of point {}", point["index"].get<int64_t>());
  const auto place = [&](json& r) {
    r["suite"] = suite_name;
    r["suite_config"] = config;
    r["point"] = point;
  };
  place(record);
  // What a worker or a peer wrote is appended only as a record --resume and the reports read.
  try {
    check_record(record, where);
  } catch (const InvalidArgument& e) {
    record = harness_record(RunStatus::kFailed, e.what(), config);
    place(record);
  }
  recorded.push_back(record);
  add_scaling_efficiency(record, recorded);
  add_measured_scaling_loss(record, recorded, out);
  try {  // the breakdown is computed from traces: checked again before it is written
    check_record(record, where);
  } catch (const InvalidArgument& e) {
    record["metrics"].erase("scaling_loss");
    record["metrics"]["scaling_loss_missing"] = e.what();
  }
  try {  // whatever else is not finite (an efficiency against a denormal baseline)
    check_record(record, where);
  } catch (const InvalidArgument& e) {
    record = harness_record(RunStatus::kFailed, e.what(), config);
    place(record);
  }
  recorded.back() = record;
  return record;
}

// The point's line once it has run, printed at once (stdout may be a block-buffered file or
// pipe: a long suite under nohup or in CI showed nothing until it ended).
void print_point_line(const PointRunner& runner, const std::string& label, const json& record,
                      double seconds) {
  const std::string status = record["status"].get<std::string>();
  fmt::print("{}{}: {} ({:.1f} s, elapsed {})\n", runner.tty() ? "\r\033[K" : "", label,
             status == "ok" ? fmt::format("ok, {:.2f} img/s",
                                          record["metrics"]["throughput_img_s"].get<double>())
                            : status + ": " + record.value("message", ""),
             seconds, clock_text(runner.elapsed()));
  std::fflush(stdout);
}

// Runs every point not already done, appending each record to `results` and to `previous`.
// Whether any failed.
bool run_points(const SweepOptions& opt, const Suite& suite, const std::vector<json>& points,
                const Fault& fault, const std::string& out, std::vector<json>& previous) {
  const std::string images = prepare_suite_images(opt, suite, points, out);
  const std::string results = out + "/results.jsonl";
  const std::set<std::string> done = ok_point_ids(previous);
  std::vector<json> recorded = latest_records(previous, points);  // scaling baselines
  std::vector<json> to_run;
  for (const json& c : points)
    if (!done.count(point_id(c))) to_run.push_back(c);
  measure_cpu_peak_once(opt, to_run);
  PointRunner runner(opt, suite, out, fault, points.size(), images);
  bool any_bad = false;
  for (size_t i = 0; i < points.size(); ++i) {
    const int64_t index = static_cast<int64_t>(i) + 1;
    const std::string id = point_id(points[i]);
    const std::string label =
        fmt::format("[{}/{}] {}", index, points.size(), describe(suite, points[i]));
    if (done.count(id)) {
      fmt::print("{}: already ok in {}, skipped (--resume)\n", label, results);
      continue;
    }
    const auto p0 = std::chrono::steady_clock::now();
    json record = runner.run(index, points[i], label);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
    const json point = {{"index", index}, {"id", id}, {"seconds", seconds}};
    record = finished_record(std::move(record), suite.name, points[i], point, recorded, out);
    append_jsonl(results, record);
    previous.push_back(record);
    // check_record has checked the status against the schema: it parses.
    any_bad =
        any_bad ||
        is_failure(
            parse_run_status(record["status"].get<std::string>()).value_or(RunStatus::kFailed));
    print_point_line(runner, label, record, seconds);
  }
  return any_bad;
}

}  // namespace

int sweep_command(const SweepOptions& opt) {
  validate_sweep_options(opt);
  Suite suite = load_suite(opt.suite, !gpu_available());
  if (!opt.systems.empty()) set_systems(suite, opt.systems);
  if (!suite.simulate.is_null()) {
    if (!opt.simulation.check || !opt.simulation.run) {
      throw InvalidArgument(
          fmt::format("{}: this command does not run a suite's simulate block", suite.path));
    }
    opt.simulation.check(suite.simulate, suite.path);
  }
  const std::vector<json> points = expand(suite, static_cast<size_t>(opt.max_points));
  check_suite_images(opt, suite, points);
  const Fault fault = parse_fault(opt.inject_fault);
  const std::string out = opt.out_dir.empty() ? "out/" + suite.name : opt.out_dir;
  fmt::print("suite {}: {} ({} points{})\n  {}\n", suite.name, suite.path, points.size(),
             suite.cpu_override_applied ? ", cpu override: no GPU here" : "", suite.description);
  std::fflush(stdout);
  if (opt.dry_run) {
    // A check of the suite: a point that could not run fails it (a real sweep records it as
    // failed and goes on).
    if (const size_t bad = print_dry_run(opt, suite, points, out)) {
      throw InvalidArgument(fmt::format("{}: {} of {} points are not runnable (listed above)",
                                        suite.path, bad, points.size()));
    }
    if (!suite.simulate.is_null()) {
      fmt::print(
          "  then its simulate block, a dlbench simulate for each network over these "
          "points (docs/simulation.md): {}\n",
          suite.simulate.dump());
    }
    return 0;
  }
  std::vector<json> previous = prepare_output(opt, out, out + "/results.jsonl");
  bool any_bad = run_points(opt, suite, points, fault, out, previous);
  // The summary covers every record of this output directory (resumed ones included), latest
  // record per point.
  print_summary(suite, latest_records(previous, points), out);
  if (!suite.simulate.is_null() && !opt.simulation.run(suite.simulate, out)) any_bad = true;
  if (opt.report) render_report(out);
  return any_bad ? 1 : 0;
}

}  // namespace dlb
