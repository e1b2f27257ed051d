// Suite files: data, not code. A suite has defaults, sweep axes (any config key) whose cartesian
// product gives the points, optional cases (configs crossed with those points, for keys that go
// together), and a cpu override used when no GPU is present.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlb {

struct Suite {
  std::string name, description, path;
  bool cpu_override_applied = false;
  nlohmann::json defaults;                                   // config key -> value
  std::vector<std::pair<std::string, nlohmann::json>> axes;  // in file order; arrays
  std::vector<nlohmann::json> cases;  // each crossed with the axes' points; none: one empty case
  // After the points, `dlbench simulate` over the run's results (docs/simulation.md): networks,
  // ranks, and optionally overlap, bucket_mb, jitter, steps, straggler. Null: none.
  nlohmann::json simulate;
  // The JPEG images of the points with data folder or shards (make-dataset's options: images,
  // val_images, classes, size, shards, quality, seed), made before the points unless the sweep's
  // --data-path names others. Null: none.
  nlohmann::json dataset;
};

// Directory of the shipped suites (suites/ in the source tree).
std::string suites_dir();
// Names of the shipped suites, sorted.
std::vector<std::string> list_suites();
// `name_or_path` is a shipped suite's name or a path ending in .json. Validates against
// suites/schema/suite.schema.json; a bad file raises InvalidArgument naming the file, the key and
// what was expected. With `use_cpu_override`, the cpu block replaces defaults keys and axes.
Suite load_suite(const std::string& name_or_path, bool use_cpu_override);
// load_suite's parse and checks of a suite file's text; `path` names it in errors. JSON nested
// deeper than 64 levels is refused before the parse.
Suite parse_suite(std::string_view text, const std::string& path, bool use_cpu_override);

// --systems=dlbench,pytorch: `systems` become the suite's axis "system" (innermost: expand),
// replacing one the file has, so that every point runs on each system in turn and a ratio comes
// from one run. InvalidArgument for an unknown or repeated name, naming the known ones, and for a
// suite whose cases set system.
void set_systems(Suite& suite, const std::vector<std::string>& systems);

// The sweep's size, the product of the axes' lengths and the cases (InvalidArgument past 2^64).
size_t count_points(const Suite& suite);
// A sweep larger than this is refused unless --max-points raises the limit: a million points
// take gigabytes to expand and years to run.
constexpr size_t kDefaultMaxPoints = 10000;
// The cartesian product of the axes over the defaults, first axis slowest, each point crossed
// with the cases (a case's keys override the defaults), then with the system axis when there is
// one: it is always innermost, so each point runs on every system in turn. InvalidArgument when it
// has more than `max_points` points.
std::vector<nlohmann::json> expand(const Suite& suite, size_t max_points = kDefaultMaxPoints);
// A stable identifier of a point's config (hash of its canonical JSON).
std::string point_id(const nlohmann::json& config);

}  // namespace dlb
