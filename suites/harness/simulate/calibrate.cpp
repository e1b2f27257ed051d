#include "suites/harness/simulate/calibrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <numeric>

#include "runtime/core/error.h"
#include "runtime/io/json_fields.h"
#include "runtime/io/json_text.h"
#include "runtime/io/text_file.h"
#include "runtime/sim/roofline.h"
#include "suites/harness/core/environment.h"
#include "suites/harness/core/launcher.h"
#include "suites/harness/core/record.h"
#include "suites/harness/core/results.h"
#include "suites/harness/core/suite.h"
#include "workloads/models/model.h"

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

// The profile's layer times into `c.layers` (and whether the backend fused ReLUs); their sum.
double read_profile(const std::string& profile, Calibration& c) {
  const nlohmann::json p = read_json(profile, "profile");
  const JsonFields pf(p, profile);
  const nlohmann::json& layers = pf.array("layers");
  double profiled_ms = 0;
  std::map<std::string, std::string> kinds;  // each layer's kind, by name
  for (size_t i = 0; i < layers.size(); ++i) {
    const JsonFields l(layers[i], pf.element("layers", i));
    kinds[l.string("name")] = l.string("kind");
    LayerTimes t;
    t.name = l.string("name");
    t.forward_ms = ms_or_zero(l, "forward_ms");
    t.backward_data_ms = ms_or_zero(l, "backward_data_ms");
    t.backward_weights_ms = ms_or_zero(l, "backward_weights_ms");
    t.backward_ms = ms_or_zero(l, "backward_ms");
    t.recompute_ms = ms_or_zero(l, "recompute_ms");
    if (l.has("fused_into")) {  // a ReLU that a batch norm or a convolution before it applied
      const std::string into = l.string("fused_into");
      (kinds.count(into) && kinds[into] == "conv2d" ? c.fused_conv_relus : c.fused_relus) = true;
    }
    profiled_ms +=
        t.forward_ms + t.backward_data_ms + t.backward_weights_ms + t.backward_ms + t.recompute_ms;
    c.layers.push_back(std::move(t));
  }
  return profiled_ms;
}

}  // namespace

bool calibrates(const nlohmann::json& r) {
  const nlohmann::json& config = r.value("config", nlohmann::json::object());
  return r.value("status", "") == "ok" && r.value("mode", "") == "measured" &&
         config.value("ranks", 0) == 1 && config.value("system", "") == "dlbench" &&
         config.value("swap", "none") == "none" && config.value("sync", "sync") == "sync" &&
         config.value("straggler", nlohmann::json()).is_null() && r.contains("paths") &&
         r["paths"].contains("profile") && r.contains("metrics") && r["metrics"].contains("phases");
}

namespace {

// A record's timed steps (metrics.step_time_s.all), each a measured step: at least a
// microsecond (runtime/sim/calibration.cpp), and within a thousand times the shortest, so that
// the jitter they calibrate stays a factor of their mean.
std::vector<double> measured_steps(const JsonFields& metrics) {
  const nlohmann::json& all = metrics.object("step_time_s").array("all");
  std::vector<double> steps;
  for (const auto& s : all) {
    if (!s.is_number() || !(s.get<double>() >= 1e-6)) {
      metrics.fail("step_time_s", "the timed steps' times, each at least 1e-6 s");
    }
    steps.push_back(s.get<double>());
  }
  if (steps.empty()) metrics.fail("step_time_s", "the timed steps' times");
  if (*std::max_element(steps.begin(), steps.end()) >
      1e3 * *std::min_element(steps.begin(), steps.end())) {
    metrics.fail("step_time_s", "the timed steps' times, within 1000 times one another");
  }
  return steps;
}

}  // namespace

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
              {"point", r.object("point").string("id")},
              {"environment", env.json()}};
  c.loss_ms = phases.number("loss_s", 0, 1e6) * 1e3;
  c.optimizer_ms = phases.number("optimizer_s", 0, 1e6) * 1e3;

  const double profiled_ms = c.loss_ms + c.optimizer_ms + read_profile(profile, c);
  const std::vector<double> steps = measured_steps(metrics);
  const double mean_s =
      std::accumulate(steps.begin(), steps.end(), 0.0) / static_cast<double>(steps.size());
  for (double s : steps) c.jitter.push_back(s / mean_s);
  c.step_ms = mean_s * 1e3;
  if (!(profiled_ms > 0)) {
    throw InvalidArgument(fmt::format("{}: the profile's passes take no time", profile));
  }
  c.scale = c.step_ms / profiled_ms;
  if (!(c.scale >= 1e-6 && c.scale <= 1e6)) {
    throw InvalidArgument(fmt::format(
        "{}: its passes take {} ms in all and the timed steps {} ms: not one step's profile "
        "(they differ more than a million times)",
        profile, profiled_ms, c.step_ms));
  }
  // As a file would be read back: the same limits (a jitter factor of 1e3, a scale of 1e6).
  return parse_calibration(calibration_json(c), where);
}

std::string calibration_key(const Calibration& c) {
  return fmt::format("{}-b{}-{}px-{}-{}-{}-{}-{}c", c.model, c.batch, c.image_size, c.precision,
                     c.backend, c.memory_plan, c.recompute, c.num_classes);
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
  const Calibration c = parse_calibration(read_json(path, "calibration"), path);
  // simulate copies the environment the calibration was measured in into every record it writes
  // (with the time it simulated): refused here, naming the file, unless a record could hold it.
  nlohmann::json environment = c.source.value("environment", nlohmann::json::object());
  if (environment.is_object()) environment["time"] = "";
  check_record_environment(environment, path + ": key 'source.environment'");
  return c;
}

namespace {

DeviceReference read_reference(const JsonFields& ref) {
  DeviceReference r;
  r.model = ref.string("model");
  find_model(r.model);  // an unknown model is refused here, naming the known ones
  r.batch = ref.integer("batch", 1, 1 << 20);
  r.image_size = ref.integer("image_size", 1, 1 << 16);
  r.precision = ref.string("precision");
  r.img_s = ref.number("img_s", 1e-9, 1e12);
  r.source = ref.string("source");
  return r;
}

}  // namespace

DeviceFile load_device(const std::string& name_or_path) {
  const bool is_path =
      name_or_path.size() > 5 && name_or_path.compare(name_or_path.size() - 5, 5, ".json") == 0;
  const std::string path =
      is_path ? name_or_path : suites_dir() + "/devices/" + name_or_path + ".json";
  if (!is_path && !fs::exists(path)) {
    std::vector<std::string> names;
    if (fs::is_directory(suites_dir() + "/devices")) {
      for (const auto& f : fs::directory_iterator(suites_dir() + "/devices")) {
        if (f.path().extension() == ".json") names.push_back(f.path().stem().string());
      }
    }
    std::sort(names.begin(), names.end());
    throw InvalidArgument(
        fmt::format("unknown device '{}': the devices are {} (or give a device "
                    "file's path, ending in .json)",
                    name_or_path, fmt::join(names, ", ")));
  }
  const nlohmann::json j = read_json(path, "device file");
  const JsonFields f(j, path);
  DeviceFile d;
  d.path = path;
  d.name = f.string("name");
  d.device = f.string("device");
  const JsonFields peaks = f.object("peak_flops");
  for (const auto& [precision, _] : peaks.json().items()) {
    d.peak_flops[precision] = peaks.number(precision, 1, 1e21);
  }
  d.peak_bytes_per_s = f.number("peak_bytes_per_s", 1, 1e18);
  if (f.json().contains("reference") && f.json()["reference"].is_array()) {
    const nlohmann::json& refs = f.array("reference");
    for (size_t i = 0; i < refs.size(); ++i) {
      d.references.push_back(read_reference(JsonFields(refs[i], f.element("reference", i))));
    }
    if (d.references.empty()) f.fail("reference", "at least one reference throughput");
  } else {
    d.references.push_back(read_reference(f.object("reference")));
  }
  const nlohmann::json& sources = f.array("sources");
  for (const auto& s : sources)
    d.sources.push_back(s.is_string() ? s.get<std::string>() : s.dump());
  if (d.sources.empty()) f.fail("sources", "the peaks' citations");
  return d;
}

namespace {

// `model`'s roofline times on `d` (declared as the CUDA backend runs it: batch norm and ReLU
// fused, max pooling's argmax kept).
RooflineTimes roofline_of(const DeviceFile& d, const std::string& model, int64_t batch,
                          int64_t image_size, const std::string& precision) {
  const std::optional<Precision> p = parse_precision(precision);
  const auto peak = d.peak_flops.find(precision);
  if (!p || peak == d.peak_flops.end()) {
    throw InvalidArgument(fmt::format("{}: no peak FLOP/s for precision '{}'", d.path, precision));
  }
  Graph g = build_model(model, ModelConfig{batch, image_size, 0, {}});
  g.declare(PrecisionPolicy::for_precision(*p), BackendTraits{Layout::kNCHW, true, false, true});
  return roofline_times(g, DevicePeaks{peak->second, d.peak_bytes_per_s});
}

}  // namespace

const DeviceReference& reference_for(const DeviceFile& d, const std::string& model,
                                     const std::string& precision, int64_t batch) {
  // How closely a reference matches: its model, then its precision, then its batch.
  auto closeness = [&](const DeviceReference& r) {
    if (r.model != model) return 0;
    return 1 + (r.precision == precision ? 2 : 0) + (r.batch == batch ? 1 : 0);
  };
  return *std::max_element(d.references.begin(), d.references.end(),
                           [&](const DeviceReference& a, const DeviceReference& b) {
                             return closeness(a) < closeness(b);
                           });
}

Calibration roofline_calibration(const DeviceFile& d, const std::string& model, int64_t batch,
                                 int64_t image_size, const std::string& precision) {
  const DeviceReference& r = reference_for(d, model, precision, batch);
  const RooflineTimes ref = roofline_of(d, r.model, r.batch, r.image_size, r.precision);
  const double measured_ms = 1e3 * static_cast<double>(r.batch) / r.img_s;
  const double efficiency = ref.step_ms() / measured_ms;
  if (!(efficiency > 0 && efficiency <= kMaxRooflineEfficiency)) {
    throw InvalidArgument(fmt::format(
        "{}: the reference ({} img/s) is more than {} times what the roofline allows ({} img/s): "
        "the peaks are too low",
        d.path, r.img_s, kMaxRooflineEfficiency,
        1e3 * static_cast<double>(r.batch) / ref.step_ms()));
  }
  const RooflineTimes t = roofline_of(d, model, batch, image_size, precision);
  Calibration c;
  c.model = model;
  c.batch = batch;
  c.image_size = image_size;
  c.num_classes = find_model(model).default_classes;
  c.precision = precision;
  c.backend = "cuda";
  c.device = d.device;
  c.fused_relus = true;
  for (LayerTimes l : t.layers) {
    for (double* ms : {&l.forward_ms, &l.backward_data_ms, &l.backward_weights_ms, &l.backward_ms,
                       &l.recompute_ms}) {
      *ms /= efficiency;
    }
    c.layers.push_back(std::move(l));
  }
  c.loss_ms = t.loss_ms / efficiency;
  c.optimizer_ms = t.optimizer_ms / efficiency;
  c.step_ms = t.step_ms() / efficiency;
  c.scale = 1;
  // The environment of a record simulated from it: this build's, for a device it does not have.
  auto memory = make_device_memory(BackendKind::kCpu, BackendOptions{});
  nlohmann::json env = collect_environment(*memory);
  for (const char* host_only : {"cpu", "cpu_threads", "blas", "onednn", "conv_algo"}) {
    env.erase(host_only);
  }
  env["device"] = d.device;
  env["backend"] = "cuda";
  c.source = {{"method", "roofline"},
              {"device_file", d.path},
              {"efficiency", efficiency},
              {"peak_flops_per_s", d.peak_flops.at(precision)},
              {"peak_bytes_per_s", d.peak_bytes_per_s},
              {"reference",
               {{"model", r.model},
                {"batch", r.batch},
                {"image_size", r.image_size},
                {"precision", r.precision},
                {"img_s", r.img_s},
                {"source", r.source}}},
              {"sources", d.sources},
              {"environment", env}};
  return c;
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
  const nlohmann::json j = read_json(path, "network file");
  if (j.is_object() && j.value("kind", "") == "bench_allreduce") {
    return network_from_bench({j}, {path}, most_local_ranks());
  }
  return parse_network(j, path);
}

}  // namespace dlb
