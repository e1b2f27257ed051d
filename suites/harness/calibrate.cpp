#include "suites/harness/calibrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <numeric>

#include "runtime/core/error.h"
#include "runtime/io/json_fields.h"
#include "runtime/io/json_text.h"
#include "runtime/io/text_file.h"
#include "suites/harness/record.h"
#include "suites/harness/results.h"
#include "suites/harness/suite.h"

namespace dlb {

namespace {

namespace fs = std::filesystem;

// A profile's milliseconds: null (a pass the layer does not run) is 0.
double ms_or_zero(const JsonFields& f, const char* key) {
  return f.has(key) ? f.number(key, 0, 1e9) : 0.0;
}

nlohmann::json read_json(const std::string& path, std::string_view what) {
  return parse_json(read_text_file(path, what), path);
}

std::string profile_path(const JsonFields& paths, const std::string& dir) {
  const std::string written = paths.string("profile");
  if (fs::exists(written)) return written;
  return dir + "/profiles/" + fs::path(written).filename().string();
}

}  // namespace

bool calibrates(const nlohmann::json& r) {
  const nlohmann::json& config = r.value("config", nlohmann::json::object());
  return r.value("status", "") == "ok" && r.value("mode", "") == "measured" &&
         config.value("ranks", 0) == 1 && config.value("system", "") == "dlbench" &&
         config.value("swap", "none") == "none" && r.contains("paths") &&
         r["paths"].contains("profile") && r.contains("metrics") && r["metrics"].contains("phases");
}

Calibration calibration_from_record(const nlohmann::json& record, const std::string& dir,
                                    const std::string& where) {
  if (!calibrates(record)) {
    throw InvalidArgument(fmt::format(
        "{}: not a point to calibrate from: it must be an ok, measured, one-rank dlbench point "
        "without swapping, traced with a profile (--trace-steps and --profile; a suite writes "
        "one when trace_steps > 0)",
        where));
  }
  const JsonFields r(record, where);
  const JsonFields config = r.object("config");
  const JsonFields metrics = r.object("metrics");
  const JsonFields phases = metrics.object("phases");
  const JsonFields env = r.object("environment");
  Calibration c;
  c.model = config.string("model");
  c.batch = config.integer("batch", 1);
  c.image_size = config.integer("image_size", 1);
  c.num_classes = config.integer("num_classes", 1);
  c.precision = config.string("precision");
  c.backend = config.string("backend");
  c.memory_plan = config.string("memory_plan");
  c.recompute = config.string("recompute");
  const std::string device = env.string_or("device", "unknown");
  c.device = device == "cpu" ? "cpu: " + env.string_or("cpu", "unknown") : device;
  const std::string profile = profile_path(r.object("paths"), dir);
  c.source = {{"method", "profile"},
              {"record", where},
              {"profile", profile},
              {"point", record["point"]["id"]},
              {"environment", record["environment"]}};
  c.loss_ms = phases.number("loss_s", 0, 1e6) * 1e3;
  c.optimizer_ms = phases.number("optimizer_s", 0, 1e6) * 1e3;

  const nlohmann::json p = read_json(profile, "profile");
  const JsonFields pf(p, profile);
  const nlohmann::json& layers = pf.array("layers");
  double profiled_ms = c.loss_ms + c.optimizer_ms;
  for (size_t i = 0; i < layers.size(); ++i) {
    const JsonFields l(layers[i], pf.element("layers", i));
    LayerTimes t;
    t.name = l.string("name");
    t.forward_ms = ms_or_zero(l, "forward_ms");
    t.backward_data_ms = ms_or_zero(l, "backward_data_ms");
    t.backward_weights_ms = ms_or_zero(l, "backward_weights_ms");
    t.backward_ms = ms_or_zero(l, "backward_ms");
    t.recompute_ms = ms_or_zero(l, "recompute_ms");
    if (l.has("fused_into")) c.fused_relus = true;
    profiled_ms +=
        t.forward_ms + t.backward_data_ms + t.backward_weights_ms + t.backward_ms + t.recompute_ms;
    c.layers.push_back(std::move(t));
  }
  const nlohmann::json& all = metrics.object("step_time_s").array("all");
  std::vector<double> steps;
  for (const auto& s : all) {
    if (s.is_number() && s.get<double>() > 0) steps.push_back(s.get<double>());
  }
  if (steps.empty()) metrics.fail("step_time_s", "the timed steps' times");
  const double mean_s =
      std::accumulate(steps.begin(), steps.end(), 0.0) / static_cast<double>(steps.size());
  for (double s : steps) c.jitter.push_back(s / mean_s);
  c.step_ms = mean_s * 1e3;
  if (!(profiled_ms > 0)) pf.fail("layers", "the layers' pass times");
  c.scale = c.step_ms / profiled_ms;
  return c;
}

std::string calibration_key(const Calibration& c) {
  return fmt::format("{}-b{}-{}px-{}-{}", c.model, c.batch, c.image_size, c.precision, c.backend);
}

std::vector<Calibration> calibrate_results(const std::string& dir) {
  const std::string results = dir + "/results.jsonl";
  const std::vector<nlohmann::json> records = read_results(results);
  std::map<std::string, Calibration> by_key;
  std::vector<Calibration> out;
  for (size_t i = 0; i < records.size(); ++i) {
    if (!calibrates(records[i])) continue;
    Calibration c = calibration_from_record(records[i], dir, fmt::format("{}:{}", results, i + 1));
    const std::string key = calibration_key(c);
    if (by_key.count(key)) continue;
    fs::create_directories(dir + "/calibration");
    write_json_atomically(dir + "/calibration/" + key + ".json", calibration_json(c));
    by_key.emplace(key, c);
    out.push_back(std::move(c));
  }
  if (out.empty()) {
    throw InvalidArgument(fmt::format(
        "{} has no point to calibrate from: the simulator needs an ok, measured, one-rank point "
        "traced with a profile (a suite point with trace_steps > 0, or dlbench run "
        "--trace-steps=N --profile=FILE --json=FILE)",
        results));
  }
  return out;
}

Calibration read_calibration(const std::string& path) {
  return parse_calibration(read_json(path, "calibration"), path);
}

std::vector<std::string> list_networks() {
  std::vector<std::string> names;
  const std::string dir = suites_dir() + "/networks";
  if (!fs::is_directory(dir)) return names;
  for (const auto& f : fs::directory_iterator(dir)) {
    if (f.path().extension() == ".json") names.push_back(f.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

Network load_network(const std::string& name_or_path) {
  const bool is_path =
      name_or_path.size() > 5 && name_or_path.compare(name_or_path.size() - 5, 5, ".json") == 0;
  if (!is_path) {
    const std::vector<std::string> names = list_networks();
    if (std::find(names.begin(), names.end(), name_or_path) == names.end()) {
      throw InvalidArgument(
          fmt::format("unknown network '{}': the presets are {} (or give a "
                      "network file's path, ending in .json)",
                      name_or_path, fmt::join(names, ", ")));
    }
  }
  const std::string path =
      is_path ? name_or_path : suites_dir() + "/networks/" + name_or_path + ".json";
  return parse_network(read_json(path, "network file"), path);
}

}  // namespace dlb
