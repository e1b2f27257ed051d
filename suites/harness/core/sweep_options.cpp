#include "suites/harness/core/sweep_options.h"

#include <fmt/format.h>

#include "runtime/core/clock.h"
#include "runtime/core/error.h"

namespace dlb {

namespace {

using json = nlohmann::json;
using T = OptionType;

Option described(std::string key, OptionType type, std::string help,
                 std::vector<std::string> values = {}, OptionRange range = {}) {
  Option o;
  o.key = std::move(key);
  o.type = type;
  o.scope = OptionScope::kCommandLine;
  o.help = std::move(help);
  o.values = std::move(values);
  o.range = range;
  return o;
}

// "a,b" -> {a, b}; an empty list or item is refused (set_systems checks the names).
std::vector<std::string> split_list(const std::string& flag, const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const size_t end = comma == std::string::npos ? text.size() : comma;
    if (end == start) {
      throw InvalidArgument(fmt::format("{}: an empty item in '{}'", flag, text));
    }
    out.push_back(text.substr(start, end - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

std::string launcher_text(LauncherKind k) {
  switch (k) {
    case LauncherKind::kAuto:
      return "auto";
    case LauncherKind::kLocal:
      return "local";
    case LauncherKind::kMpirun:
      return "mpirun";
    case LauncherKind::kSrun:
      return "srun";
  }
  return "auto";
}

// What the sweep runs, on whom, and where its records go.
void add_suite_flags(std::vector<SweepFlag>& t) {
  t.push_back({described("suite", T::kString,
                         "run a suite: a shipped name (dlbench list), PATH.json, or micro (the "
                         "micro-benchmarks)"),
               [](SweepOptions& o, const json& v) { o.suite = v.get<std::string>(); },
               [](const SweepOptions& o) { return json(o.suite); }});
  t.push_back(
      {described("systems", T::kString,
                 "run every point on each of these in turn, comma-separated: "
                 "dlbench,pytorch (the PyTorch peer, reports/peers/)"),
       [](SweepOptions& o, const json& v) {
         o.systems = split_list("--systems", v.get<std::string>());
       },
       [](const SweepOptions& o) { return json(fmt::format("{}", fmt::join(o.systems, ","))); }});
  Option out = described("out", T::kPath, "output directory (default out/<suite>)");
  out.path_role = PathRole::kOutputDir;
  t.push_back({out, [](SweepOptions& o, const json& v) { o.out_dir = v.get<std::string>(); },
               [](const SweepOptions& o) { return json(o.out_dir); }});
  Option images = described("data_path", T::kPath,
                            "the JPEG images of the points with data folder or shards: a folder "
                            "with train/<class>/*.JPEG (and shards/*.tar for shards) (default: "
                            "the suite's dataset, made in <out>/dataset)");
  images.path_role = PathRole::kInput;
  t.push_back({images, [](SweepOptions& o, const json& v) { o.data_path = v.get<std::string>(); },
               [](const SweepOptions& o) { return json(o.data_path); }});
  t.push_back({described("resume", T::kBoolean, "skip the points already recorded as ok in --out"),
               [](SweepOptions& o, const json& v) { o.resume = v.get<bool>(); },
               [](const SweepOptions& o) { return json(o.resume); }});
}

// How each point is run: its timeout, its launcher, its traced steps; and what the sweep does
// around the points.
void add_point_flags(std::vector<SweepFlag>& t) {
  OptionRange wait;
  wait.min = 0;
  wait.min_exclusive = true;
  wait.max = kLongestWaitSeconds;
  t.push_back({described("timeout", T::kNumber, "seconds per point before its processes are killed",
                         {}, wait),
               [](SweepOptions& o, const json& v) { o.timeout_s = v.get<double>(); },
               [](const SweepOptions& o) { return json(o.timeout_s); }});
  t.push_back({described("dry_run", T::kBoolean, "print the points and their launch commands only"),
               [](SweepOptions& o, const json& v) { o.dry_run = v.get<bool>(); },
               [](const SweepOptions& o) { return json(o.dry_run); }});
  OptionRange at_least_one;
  at_least_one.min = 1;
  t.push_back({described("max_points", T::kInteger,
                         "refuse a suite that expands to more points than this", {}, at_least_one),
               [](SweepOptions& o, const json& v) { o.max_points = v.get<int64_t>(); },
               [](const SweepOptions& o) { return json(o.max_points); }});
  t.push_back({described("launcher", T::kString, "how each point's ranks are started",
                         {"auto", "local", "mpirun", "srun"}),
               [](SweepOptions& o, const json& v) {
                 o.launcher = *parse_launcher(v.get<std::string>());  // one of `values`
               },
               [](const SweepOptions& o) { return json(launcher_text(o.launcher)); }});
  t.push_back({described("no_report", T::kBoolean,
                         "do not render plots and report.{md,html} after the sweep"),
               [](SweepOptions& o, const json& v) { o.report = !v.get<bool>(); },
               [](const SweepOptions& o) { return json(!o.report); }});
  OptionRange none_or_more;
  none_or_more.min = 0;
  t.push_back({described("trace_steps", T::kInteger,
                         "timed steps of each point to trace, as its run's --trace-steps (0: off; "
                         "a single run traces none unless told)",
                         {}, none_or_more),
               [](SweepOptions& o, const json& v) { o.trace_steps = v.get<int64_t>(); },
               [](const SweepOptions& o) { return json(o.trace_steps); }});
  Option fault = described("inject_fault", T::kString, "test only: crash@I, hang@I or oom@I");
  fault.hidden = true;
  t.push_back({fault, [](SweepOptions& o, const json& v) { o.inject_fault = v.get<std::string>(); },
               [](const SweepOptions& o) { return json(o.inject_fault); }});
}

std::vector<SweepFlag> make_table() {
  std::vector<SweepFlag> t;
  add_suite_flags(t);
  add_point_flags(t);
  return t;
}

}  // namespace

const std::vector<SweepFlag>& sweep_flag_table() {
  static const std::vector<SweepFlag> table = make_table();
  return table;
}

void apply_sweep_flag(SweepOptions& o, const SweepFlag& flag, const std::string& text) {
  const json v = value_from_text(flag.option, text);
  check_option_value(flag.option, v, OptionOrigin::kCommandLine);
  flag.set(o, v);
}

void validate_sweep_options(const SweepOptions& options) {
  for (const SweepFlag& flag : sweep_flag_table())
    check_option_value(flag.option, flag.get(options), OptionOrigin::kCommandLine);
}

}  // namespace dlb
