#include "suites/harness/check_ops/check_ops_report.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <map>
#include <set>

#include "runtime/check/bounds.h"
#include "suites/harness/core/environment.h"
#include "suites/harness/core/record.h"

namespace dlb {
namespace {

constexpr int kCheckRecordVersion = 1;

std::string config_name(const CheckRow& row) {
  std::string s(row.precision ? precision_name(*row.precision) : "float64");
  if (row.algorithm) s += "/" + std::string(conv_algo_choice_name(*row.algorithm));
  return s;
}

// "eng0 fallback": the engine and the notes it declares.
std::string engine_text(const PassResult& r) {
  if (!r.notes) return r.algorithm;
  std::vector<std::string> notes = engine_note_names(*r.notes);
  return notes.empty() ? r.algorithm : fmt::format("{} {}", r.algorithm, fmt::join(notes, ","));
}

bool lacks_tensor_cores(const CheckRow& row) {
  if (!row.precision || !row.result.notes) return false;
  PassAlgorithm a;
  a.notes = row.result.notes;
  return dlb::lacks_tensor_cores(a, *row.precision);
}

// Ratios beyond any bound (NaN, a difference where none is allowed) print as "inf".
std::string ratio_text(double r) { return r >= DBL_MAX ? "inf" : fmt::format("{:.3g}", r); }

nlohmann::json ratio_json(double r) {
  return r >= DBL_MAX ? nlohmann::json(nullptr) : nlohmann::json(r);
}

nlohmann::json number_json(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(fmt::format("{}", v));
}

}  // namespace

int64_t CheckRun::failures() const {
  return std::count_if(rows.begin(), rows.end(), [](const CheckRow& r) {
    return r.result.status == CheckStatus::kFail || r.result.status == CheckStatus::kError;
  });
}

std::string repro_command(const CheckRun& run, const CheckRow& row) {
  std::string cmd = fmt::format("dlbench check-ops --backend={}", backend_kind_name(run.kind));
  if (row.precision) cmd += fmt::format(" --precisions={}", precision_name(*row.precision));
  if (row.algorithm) cmd += fmt::format(" --conv-algos={}", conv_algo_choice_name(*row.algorithm));
  cmd += fmt::format(" --instance='{}' --passes={}", row.instance->op.spec(),
                     check_pass_name(row.result.pass));
  if (run.mode != CheckMode::kCompare) cmd += fmt::format(" --mode={}", check_mode_name(run.mode));
  if (run.seed != 1) cmd += fmt::format(" --seed={}", run.seed);
  if (!run.perturb.empty()) cmd += fmt::format(" --perturb={}", run.perturb);
  if (run.conv_math != BackendOptions{}.conv_math) {
    cmd += fmt::format(" --conv-math={}", conv_math_name(run.conv_math));
  }
  return cmd;
}

nlohmann::json check_environment(const Backend& backend) {
  nlohmann::json env = collect_environment(backend);
  env["backend"] = std::string(backend.name());
  return env;
}

void print_instances(const std::vector<GridInstance>& instances,
                     const std::vector<std::string>& notes) {
  for (const GridInstance& g : instances) {
    fmt::print("{}  ({}{})\n", g.op.spec(), g.origins.front(),
               g.origins.size() > 1 ? fmt::format(" and {} more", g.origins.size() - 1) : "");
  }
  for (const std::string& n : notes) fmt::print("note: {}\n", n);
  fmt::print("{} op instances\n", instances.size());
}

void progress(size_t done, size_t total, const OpInstance& op) {
  if (!isatty(STDERR_FILENO)) return;
  if (done == total) {
    fmt::print(stderr, "\r\033[K");
    return;
  }
  fmt::print(stderr, "\r\033[K[{}/{}] {}", done + 1, total, op.spec().substr(0, 100));
}

void print_row(const CheckRun& run, const CheckRow& row) {
  const PassResult& r = row.result;
  std::string line =
      fmt::format("{:<4} {:<11} {:<16} {}", check_status_name(r.status), config_name(row),
                  check_pass_name(r.pass), row.instance->op.spec());
  if (run.mode == CheckMode::kPerf && r.status != CheckStatus::kUnsupported) {
    line += fmt::format("  {:.3f} ms", r.seconds * 1e3);
    if (r.flops > 0) line += fmt::format("  {:.2f} GFLOP/s", r.flops / r.seconds * 1e-9);
  } else if (r.worst.index >= 0) {
    line += fmt::format("  worst/bound {}", ratio_text(r.worst.ratio));
  }
  if (!r.algorithm.empty()) line += fmt::format("  [{}]", engine_text(r));
  fmt::print("{}\n", line);
  if (r.status != CheckStatus::kFail && r.status != CheckStatus::kError) return;
  if (r.worst.index >= 0) {
    fmt::print(
        "     worst element: {}[{}] = {:.9g}, float64 {:.9g}, |difference| {:.3g}, bound {:.3g}\n",
        r.worst.tensor, r.worst.index, r.worst.got, r.worst.want,
        std::fabs(r.worst.got - r.worst.want), r.worst.bound);
  }
  if (!r.message.empty()) fmt::print("     {}\n", r.message);
  fmt::print("     from: {}\n", row.instance->origins.front());
  fmt::print("     reproduce: {}\n", repro_command(run, row));
}

int64_t CheckRun::without_tensor_cores() const {
  int64_t n = 0;
  for (const CheckRow& row : rows) n += lacks_tensor_cores(row);
  return n;
}

void print_summary(const CheckRun& run, size_t instances) {
  struct Tally {
    std::set<const GridInstance*> instances;
    int64_t checks = 0, failed = 0, unsupported = 0;
    double worst = 0;
  };
  std::map<OpKind, Tally> by_op;
  for (const CheckRow& row : run.rows) {
    Tally& t = by_op[row.instance->op.kind];
    t.instances.insert(row.instance);
    ++t.checks;
    t.failed += row.result.status == CheckStatus::kFail;
    t.unsupported += row.result.status == CheckStatus::kUnsupported;
    if (row.result.status != CheckStatus::kUnsupported)
      t.worst = std::max(t.worst, row.result.worst.ratio);
  }
  fmt::print("\n{:<22} {:>9} {:>7} {:>7} {:>11} {:>12}\n", "op", "instances", "checks", "failed",
             "unsupported", "worst/bound");
  for (const auto& [kind, t] : by_op) {
    fmt::print("{:<22} {:>9} {:>7} {:>7} {:>11} {:>12}\n", op_kind_name(kind), t.instances.size(),
               t.checks, t.failed, t.unsupported, ratio_text(t.worst));
  }
  for (const std::string& n : run.notes) fmt::print("note: {}\n", n);
  if (const int64_t n = run.without_tensor_cores(); n > 0) {
    fmt::print(
        "warning: {} tf32 or 16-bit passes ran on engines without tensor cores (their rows "
        "say which)\n",
        n);
  }
  fmt::print("check-ops {} on {}: {} instances, {} checks, {} failed, in {:.1f} s\n",
             check_mode_name(run.mode), backend_kind_name(run.kind), instances, run.rows.size(),
             run.failures(), run.seconds);
}

nlohmann::json check_record(const CheckRun& run, size_t instances) {
  nlohmann::json rows = nlohmann::json::array();
  for (const CheckRow& row : run.rows) {
    const PassResult& r = row.result;
    nlohmann::json j = {
        {"instance", row.instance->op.spec()},
        {"op", std::string(op_kind_name(row.instance->op.kind))},
        {"origins", row.instance->origins},
        {"precision", row.precision ? nlohmann::json(std::string(precision_name(*row.precision)))
                                    : nlohmann::json(nullptr)},
        {"conv_algo", row.algorithm
                          ? nlohmann::json(std::string(conv_algo_choice_name(*row.algorithm)))
                          : nlohmann::json(nullptr)},
        {"pass", std::string(check_pass_name(r.pass))},
        {"status", std::string(check_status_name(r.status))},
        {"elements", r.elements},
        {"algorithm", r.algorithm},
        {"message", r.message}};
    if (r.notes) j["engine_notes"] = engine_note_names(*r.notes);
    if (r.worst.index >= 0) {
      j["worst"] = {{"tensor", r.worst.tensor},        {"index", r.worst.index},
                    {"got", number_json(r.worst.got)}, {"want", number_json(r.worst.want)},
                    {"bound", r.worst.bound},          {"ratio", ratio_json(r.worst.ratio)}};
    }
    if (run.mode == CheckMode::kPerf)
      j["perf"] = {{"seconds", r.seconds}, {"flops", r.flops}, {"bytes", r.bytes}};
    if (r.status == CheckStatus::kFail || r.status == CheckStatus::kError) {
      j["reproduce"] = repro_command(run, row);
    }
    rows.push_back(std::move(j));
  }
  return {{"schema_version", kCheckRecordVersion},
          {"kind", "check_ops"},
          {"environment", run.environment},
          {"config",
           {{"backend", std::string(backend_kind_name(run.kind))},
            {"mode", std::string(check_mode_name(run.mode))},
            {"seed", run.seed},
            {"conv_math", run.kind == BackendKind::kCuda
                              ? nlohmann::json(std::string(conv_math_name(run.conv_math)))
                              : nlohmann::json(nullptr)},
            {"bounds", {{"c", kC}, {"ulps", kUlps}}}}},
          {"summary",
           {{"instances", instances},
            {"checks", run.rows.size()},
            {"failed", run.failures()},
            {"without_tensor_cores", run.without_tensor_cores()},
            {"seconds", run.seconds}}},
          {"notes", run.notes},
          {"rows", std::move(rows)}};
}

void write_check_record(const std::string& path, const CheckRun& run, size_t instances) {
  write_json_atomically(path, check_record(run, instances));
}

}  // namespace dlb
