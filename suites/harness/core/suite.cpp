#include "suites/harness/core/suite.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "runtime/core/checked.h"
#include "runtime/core/error.h"
#include "runtime/core/hash.h"
#include "runtime/io/json_text.h"
#include "runtime/io/text_file.h"
#include "suites/harness/core/json_schema.h"
#include "suites/harness/core/option_table.h"
#include "suites/harness/core/source_dir.h"

namespace dlb {
namespace fs = std::filesystem;

std::string suites_dir() {
  if (const char* env = std::getenv("DLB_SUITES_DIR")) return env;
  return source_dir() + "/suites";
}

std::vector<std::string> list_suites() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(suites_dir())) {
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

namespace {
std::string read_text(const std::string& path, const std::string& what) {
  return read_text_file(path, what);  // a regular file, never a directory, FIFO or device
}

nlohmann::json unordered(const nlohmann::ordered_json& j) {
  return nlohmann::json::parse(j.dump());
}
}  // namespace

std::string suite_path(const std::string& name_or_path) {
  std::string path = name_or_path;
  if (path.size() < 5 || path.substr(path.size() - 5) != ".json") {
    path = suites_dir() + "/" + name_or_path + ".json";
    if (!fs::exists(path)) {
      throw InvalidArgument(
          fmt::format("unknown suite '{}' (shipped: {}; the micro-benchmarks: micro; or give "
                      "a path to a .json file)",
                      name_or_path, fmt::join(list_suites(), ", ")));
    }
  }
  return path;
}

Suite load_suite(const std::string& name_or_path, bool use_cpu_override) {
  const std::string path = suite_path(name_or_path);
  return parse_suite(read_text(path, "suite file"), path, use_cpu_override);
}

Suite parse_suite(std::string_view text, const std::string& path, bool use_cpu_override) {
  // Parsed keeping the file's key order, which is the sweep's axis order.
  const auto file = parse_json<nlohmann::ordered_json>(text, path);
  const nlohmann::json j = unordered(file);
  const std::string schema_path = suites_dir() + "/schema/suite.schema.json";
  const auto schema = parse_json(read_text(schema_path, "schema"), schema_path);
  const auto errors = validate_json(j, schema);
  if (!errors.empty()) {
    // One line: the first problem, and how many more there are.
    throw InvalidArgument(fmt::format(
        "{}: invalid suite: {}{}", path, errors.front(),
        errors.size() > 1 ? fmt::format(" (and {} more)", errors.size() - 1) : std::string()));
  }
  Suite s{j["name"], j["description"], path, false, j["defaults"], {}, {}, nullptr, nullptr};
  for (const auto& [key, values] : file["sweep"].items())
    s.axes.emplace_back(key, unordered(values));
  if (j.contains("simulate")) s.simulate = j["simulate"];
  if (use_cpu_override && j["cpu"].contains("simulate")) s.simulate = j["cpu"]["simulate"];
  if (j.contains("dataset")) s.dataset = j["dataset"];
  if (use_cpu_override && j["cpu"].contains("dataset")) s.dataset = j["cpu"]["dataset"];
  if (use_cpu_override) {
    s.cpu_override_applied = true;
    const auto& cpu = file["cpu"];
    if (cpu.contains("defaults")) {
      for (const auto& [k, v] : cpu["defaults"].items()) s.defaults[k] = unordered(v);
    }
    if (cpu.contains("sweep")) {
      for (const auto& [k, v] : cpu["sweep"].items()) {
        const std::string& key = k;  // a structured binding cannot be captured in C++17
        auto it =
            std::find_if(s.axes.begin(), s.axes.end(), [&](auto& a) { return a.first == key; });
        if (it != s.axes.end())
          it->second = unordered(v);
        else
          s.axes.emplace_back(key, unordered(v));
      }
    }
  }
  const auto& cases = use_cpu_override && file["cpu"].contains("cases")
                          ? file["cpu"]["cases"]
                          : file.value("cases", nlohmann::ordered_json::array());
  for (const auto& c : cases) {
    for (const auto& [k, _] : c.items()) {
      const std::string& key = k;
      if (std::any_of(s.axes.begin(), s.axes.end(), [&](auto& a) { return a.first == key; })) {
        throw InvalidArgument(
            fmt::format("{}: a case sets '{}', which is also a sweep axis", path, key));
      }
    }
    s.cases.push_back(unordered(c));
  }
  if (s.axes.empty() && s.cases.empty()) {
    throw InvalidArgument(fmt::format("{}: the suite has no sweep axis and no case", path));
  }
  for (const auto& [k, v] : s.axes) s.defaults.erase(k);  // an axis overrides a default
  return s;
}

void set_systems(Suite& suite, const std::vector<std::string>& systems) {
  const Option& option = *find_option("system");
  nlohmann::json values = nlohmann::json::array();
  for (const std::string& name : systems) {
    if (std::find(option.values.begin(), option.values.end(), name) == option.values.end()) {
      throw InvalidArgument(fmt::format("--systems: unknown system '{}' (known: {})", name,
                                        fmt::join(option.values, ", ")));
    }
    if (std::find(values.begin(), values.end(), name) != values.end()) {
      throw InvalidArgument(fmt::format("--systems names '{}' twice", name));
    }
    values.push_back(name);
  }
  if (values.empty()) throw InvalidArgument("--systems needs at least one system");
  for (const auto& c : suite.cases) {
    if (c.contains("system")) {
      throw InvalidArgument(fmt::format(
          "--systems: {} has a case that sets system; the axis would contradict it", suite.path));
    }
  }
  auto& axes = suite.axes;
  axes.erase(std::remove_if(axes.begin(), axes.end(), [](auto& a) { return a.first == "system"; }),
             axes.end());
  axes.emplace_back("system", values);
  suite.defaults.erase("system");
}

size_t count_points(const Suite& s) {
  uint64_t n = 1;
  for (const auto& [key, values] : s.axes) n = checked_mul(n, values.size(), "the sweep's points");
  return checked_mul(n, std::max<uint64_t>(s.cases.size(), 1), "the sweep's points");
}

std::vector<nlohmann::json> expand(const Suite& s, size_t max_points) {
  const size_t n = count_points(s);
  if (n > max_points) {
    throw InvalidArgument(fmt::format(
        "{}: the suite expands to {} points, more than the limit of {} (--max-points raises it)",
        s.path, n, max_points));
  }
  // The system axis comes last, after the cases: each point runs on every system in turn.
  const auto cross = [](const std::vector<nlohmann::json>& points, const std::string& key,
                        const nlohmann::json& values) {
    std::vector<nlohmann::json> next;
    for (const auto& p : points) {
      for (const auto& v : values) {
        nlohmann::json q = p;
        q[key] = v;
        next.push_back(std::move(q));
      }
    }
    return next;
  };
  std::vector<nlohmann::json> points{s.defaults};
  const nlohmann::json* systems = nullptr;
  for (const auto& [key, values] : s.axes) {
    if (key == "system") {
      systems = &values;
    } else {
      points = cross(points, key, values);
    }
  }
  if (!s.cases.empty()) {
    std::vector<nlohmann::json> crossed;
    for (const auto& p : points) {
      for (const auto& c : s.cases) {
        nlohmann::json q = p;
        q.update(c);
        crossed.push_back(std::move(q));
      }
    }
    points = std::move(crossed);
  }
  return systems ? cross(points, "system", *systems) : points;
}

std::string point_id(const nlohmann::json& config) {
  const std::string canonical = config.dump();  // nlohmann sorts keys
  return fmt::format("{:016x}", fnv1a(canonical.data(), canonical.size()));
}

}  // namespace dlb
