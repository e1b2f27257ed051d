#include "suites/harness/sweep_command.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "runtime/backend/backend.h"
#include "runtime/core/error.h"
#include "suites/harness/option_table.h"
#include "suites/harness/record.h"
#include "suites/harness/report_hook.h"
#include "suites/harness/results.h"
#include "suites/harness/run_command.h"
#include "suites/harness/suite.h"

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

// The error line a failed worker printed ("dlbench: error (kind): message").
std::string error_message(const std::string& log) {
  const std::string marker = "dlbench: error";
  const size_t at = log.rfind(marker);
  if (at == std::string::npos) return "";
  const size_t colon = log.find("): ", at);
  const size_t end = log.find('\n', at);
  const size_t from = colon == std::string::npos ? at : colon + 3;
  return log.substr(from, end == std::string::npos ? std::string::npos : end - from);
}

json failure_record(const std::string& status, const std::string& message, const json& config,
                    const RunOptions& o) {
  // The suite's config, with the defaults of what it leaves out (o holds the defaults when the
  // config itself failed to parse).
  json cfg = config;
  if (!cfg.contains("model")) cfg["model"] = o.model;
  if (!cfg.contains("batch")) cfg["batch"] = o.batch.value_or(kDefaultBatch);
  if (!cfg.contains("ranks")) cfg["ranks"] = o.ranks;
  return {{"schema_version", kResultSchemaVersion},
          {"kind", "train"},
          {"status", status},
          {"message", message},
          {"mode", "measured"},
          {"config", cfg},
          {"global_batch", o.batch.value_or(kDefaultBatch) * o.ranks}};
}

struct Fault {
  std::string kind;
  int64_t index = 0;
};

Fault parse_fault(const std::string& spec) {
  if (spec.empty()) return {};
  const size_t at = spec.find('@');
  Fault f{spec.substr(0, at), 0};
  if (at != std::string::npos) f.index = std::atoll(spec.c_str() + at + 1);
  if ((f.kind != "crash" && f.kind != "hang" && f.kind != "oom") || f.index < 1) {
    throw InvalidArgument(
        fmt::format("--inject-fault={}: expected crash@I, hang@I or oom@I", spec));
  }
  return f;
}

void print_summary(const Suite& suite, const std::vector<json>& records, const std::string& out) {
  // Efficiency(N) = throughput(N) / (N x throughput(1)) against the 1-rank point whose config
  // is the same but for ranks.
  auto base_key = [](json c) {
    c.erase("ranks");
    return c.dump();
  };
  std::map<std::string, double> one_rank;
  for (const auto& r : records) {
    if (r["status"] == "ok" && r["config"]["ranks"] == 1) {
      one_rank.emplace(base_key(r["suite_config"]), r["metrics"]["throughput_img_s"].get<double>());
    }
  }
  json points = json::array();
  std::map<std::string, int> counts;
  size_t width = 5;  // the point column fits the longest description
  for (const auto& r : records) width = std::max(width, describe(suite, r["suite_config"]).size());
  fmt::print("\n{:>4}  {:<{}} {:>12} {:>11} {:>10}  {}\n", "#", "point", width, "images/s",
             "efficiency", "peak MiB", "status");
  for (const auto& r : records) {
    const int64_t ranks = r["config"]["ranks"].get<int64_t>();
    json entry = {{"index", r["point"]["index"]},
                  {"id", r["point"]["id"]},
                  {"config", r["suite_config"]},
                  {"status", r["status"]}};
    std::string thr = "-", eff = "-", mem = "-";
    if (r["status"] == "ok") {
      const double t = r["metrics"]["throughput_img_s"].get<double>();
      thr = fmt::format("{:.2f}", t);
      entry["throughput_img_s"] = t;
      auto it = one_rank.find(base_key(r["suite_config"]));
      if (it != one_rank.end()) {
        const double e = t / (static_cast<double>(ranks) * it->second);
        eff = fmt::format("{:.1f}%", 100 * e);
        entry["scaling_efficiency"] = e;
      }
      const double peak = r["memory"]["peak_bytes_total"].get<double>();
      mem = fmt::format("{:.1f}", peak / (1024.0 * 1024));
      entry["peak_bytes_total"] = peak;
    } else {
      entry["message"] = r.value("message", "");
    }
    ++counts[r["status"].get<std::string>()];
    const std::string status = r["status"] == "ok"
                                   ? "ok"
                                   : fmt::format("{}: {}", r["status"].get<std::string>(),
                                                 r.value("message", "").substr(0, 70));
    fmt::print("{:>4}  {:<{}} {:>12} {:>11} {:>10}  {}\n", r["point"]["index"].get<int64_t>(),
               describe(suite, r["suite_config"]), width, thr, eff, mem, status);
    points.push_back(entry);
  }
  std::string count_text;
  for (const auto& [k, v] : counts)
    count_text += fmt::format("{}{} {}", count_text.empty() ? "" : ", ", v, k);
  fmt::print("{} points: {}. Records: {}/results.jsonl\n", records.size(), count_text, out);
  write_json_atomically(out + "/summary.json", {{"suite", suite.name},
                                                {"suite_file", suite.path},
                                                {"cpu_override", suite.cpu_override_applied},
                                                {"counts", counts},
                                                {"points", points}});
}

}  // namespace

int sweep_command(const SweepOptions& opt) {
  if (!(opt.timeout_s > 0)) {
    throw InvalidArgument(fmt::format("--timeout must be positive (got {})", opt.timeout_s));
  }
  if (opt.trace_steps < 0) throw InvalidArgument("--trace-steps must be >= 0");
  const bool gpu = gpu_available();
  const Suite suite = load_suite(opt.suite, !gpu);
  const std::vector<json> points = expand(suite);
  const Fault fault = parse_fault(opt.inject_fault);
  const std::string out = opt.out_dir.empty() ? "out/" + suite.name : opt.out_dir;
  const std::string results = out + "/results.jsonl";

  fmt::print("suite {}: {} ({} points{})\n  {}\n", suite.name, suite.path, points.size(),
             suite.cpu_override_applied ? ", cpu override: no GPU here" : "", suite.description);
  if (opt.dry_run) {
    for (size_t i = 0; i < points.size(); ++i) {
      RunOptions o;
      try {
        o = options_from_json(points[i]);
      } catch (const InvalidArgument& e) {
        fmt::print("  [{}] {}  {}: not runnable: {}\n", i + 1, describe(suite, points[i]),
                   point_id(points[i]), e.what());
        continue;
      }
      const auto cmd = launch_command_here(
          opt.launcher, o.ranks,
          {self_executable(), "worker",
           "--point=" + out + "/points/" + point_stem(i + 1, points[i]) + ".json"});
      fmt::print("  [{}] {}  {}: {}\n", i + 1, describe(suite, points[i]), point_id(points[i]),
                 fmt::join(cmd.argv, " "));
    }
    return 0;
  }
  if (fs::exists(results) && !opt.resume) {
    throw InvalidArgument(
        fmt::format("{} already holds results; pass --resume to continue that "
                    "sweep, or --out=DIR for a new one",
                    out));
  }
  for (const char* sub : {"points", "traces", "profiles", "logs"})
    fs::create_directories(out + "/" + sub);
  const std::set<std::string> done = opt.resume ? ok_point_ids(results) : std::set<std::string>{};

  const bool tty = isatty(STDOUT_FILENO);
  const auto t0 = std::chrono::steady_clock::now();
  double launched_seconds = 0;
  int64_t launched = 0;
  bool any_bad = false;
  for (size_t i = 0; i < points.size(); ++i) {
    const int64_t index = static_cast<int64_t>(i) + 1;
    const json& config = points[i];
    const std::string id = point_id(config);
    const std::string label =
        fmt::format("[{}/{}] {}", index, points.size(), describe(suite, config));
    if (done.count(id)) {
      fmt::print("{}: already ok in {}, skipped (--resume)\n", label, results);
      continue;
    }
    RunOptions o;
    json record;
    const auto p0 = std::chrono::steady_clock::now();
    try {
      // A config that does not parse is this point's failure; the sweep goes on.
      o = options_from_json(config);
      validate_run_options(o);
      const std::string stem = point_stem(index, config);
      const std::string point_file = out + "/points/" + stem + ".json";
      const std::string record_file = out + "/points/" + stem + ".record.json";
      const std::string log_file = out + "/logs/" + stem + ".log";
      json point = {{"suite", suite.name},
                    {"index", index},
                    {"id", id},
                    {"config", config},
                    {"record", record_file},
                    {"trace_steps", std::min(opt.trace_steps, o.steps)},
                    {"trace", out + "/traces/" + stem + ".trace.json"},
                    {"profile", out + "/profiles/" + stem + ".profile.json"},
                    {"mllog", o.data == DataSource::kDigits ? out + "/mllog/" + stem + ".mllog"
                                                            : std::string()},
                    {"suite_file", suite.path},
                    {"fault", fault.index == index ? fault.kind : ""}};
      if (o.data == DataSource::kDigits) fs::create_directories(out + "/mllog");
      write_json_atomically(point_file, point);
      fs::remove(record_file);
      const auto cmd = launch_command_here(opt.launcher, o.ranks,
                                           {self_executable(), "worker", "--point=" + point_file});
      const double eta_each = launched ? launched_seconds / launched : 0;
      const ProcessResult pr = run_process(cmd, opt.timeout_s, log_file, [&](double elapsed) {
        if (!tty) return;
        const double total =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double left = eta_each * static_cast<double>(points.size() - i) - elapsed;
        fmt::print("\r\033[K{}  running {}  elapsed {}  ETA {}", label, clock_text(elapsed),
                   clock_text(total), eta_each > 0 ? clock_text(std::max(left, 0.0)) : "--:--");
        std::fflush(stdout);
      });
      ++launched;
      launched_seconds += pr.seconds;
      const std::string log = tail_of_file(log_file, 4000);
      if (pr.timed_out) {
        record = failure_record("timeout",
                                fmt::format("no result within --timeout={} s; its "
                                            "process group was killed",
                                            opt.timeout_s),
                                config, o);
      } else if (pr.signal) {
        record = failure_record(
            "crashed", fmt::format("killed by signal {} ({})", pr.signal, strsignal(pr.signal)),
            config, o);
      } else if (pr.exit_code == 0 && fs::exists(record_file)) {
        std::ifstream in(record_file);
        record = json::parse(in);
      } else {
        const std::string status = pr.exit_code == 3   ? "oom"
                                   : pr.exit_code == 4 ? "unsupported"
                                                       : "failed";
        std::string msg = error_message(log);
        if (msg.empty()) msg = fmt::format("worker exited with code {}", pr.exit_code);
        record = failure_record(status, msg, config, o);
      }
      if (record["status"] != "ok") record["stderr_tail"] = log;
    } catch (const Unsupported& e) {
      record = failure_record("unsupported", e.what(), config, o);
    } catch (const InvalidArgument& e) {
      record = failure_record("failed", e.what(), config, o);
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
    record["suite"] = suite.name;
    record["suite_config"] = config;
    record["point"] = {{"index", index}, {"id", id}, {"seconds", seconds}};
    append_jsonl(results, record);
    const std::string status = record["status"].get<std::string>();
    any_bad = any_bad || status == "failed" || status == "crashed" || status == "timeout";
    const double total =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("{}{}: {} ({:.1f} s, elapsed {})\n", tty ? "\r\033[K" : "", label,
               status == "ok" ? fmt::format("ok, {:.2f} img/s",
                                            record["metrics"]["throughput_img_s"].get<double>())
                              : status + ": " + record.value("message", ""),
               seconds, clock_text(total));
  }
  // The summary covers every record of this output directory (resumed ones included), latest
  // record per point.
  std::map<std::string, json> latest;
  for (const auto& r : read_jsonl(results)) latest[r["point"]["id"].get<std::string>()] = r;
  std::vector<json> ordered;
  for (const auto& p : points) {
    auto it = latest.find(point_id(p));
    if (it != latest.end()) ordered.push_back(it->second);
  }
  print_summary(suite, ordered, out);
  if (opt.report) render_report(out);
  return any_bad ? 1 : 0;
}

int worker_command(const std::string& point_file) {
  std::ifstream in(point_file);
  if (!in) throw InvalidArgument("cannot open point file " + point_file);
  const json point = json::parse(in);
  RunOptions o = options_from_json(point.at("config"));
  o.json_path = point.at("record");
  o.trace_steps = point.value("trace_steps", 0);
  o.trace_path = point.value("trace", "");
  o.profile_path = point.value("profile", "");
  o.mllog_path = point.value("mllog", "");
  o.config_file = point.value("suite_file", "");
  const std::string fault = point.value("fault", "");
  if (fault == "crash") o.fault = RunOptions::Fault::kCrash;
  if (fault == "hang") o.fault = RunOptions::Fault::kHang;
  if (fault == "oom") o.fault = RunOptions::Fault::kOom;
  return run_command(o);
}

}  // namespace dlb
