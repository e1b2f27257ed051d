// Suite files: expansion, the cpu override, and schema rejection of malformed files with a
// message naming the file, the key and what was expected.
#include "suites/harness/core/suite.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <fstream>

#include "runtime/comm/communicator.h"
#include "runtime/core/error.h"
#include "runtime/core/host_cpus.h"
#include "suites/harness/core/host_share.h"
#include "suites/harness/core/json_schema.h"
#include "suites/harness/core/launcher.h"
#include "suites/harness/core/machine_peak.h"
#include "suites/harness/core/option_table.h"
#include "suites/harness/core/peers.h"
#include "suites/harness/run/image_input.h"
#include "suites/harness/run/training.h"
#include "suites/harness/sweep/suite_images.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

std::string write_suite(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "dlb_suite_" + name + ".json";
  std::ofstream(path) << text;
  return path;
}

const char* kValid = R"({
  "name": "t", "description": "test",
  "defaults": {"model": "resnet50", "batch": 32, "backend": "cuda", "precision": "bf16", "steps": 5},
  "sweep": {"ranks": [1, 2], "overlap": ["none", "backward", "forward"]},
  "cpu": {"defaults": {"model": "resnet18", "backend": "cpu", "precision": "fp32"},
          "sweep": {"ranks": [1, 2, 4], "batch": [4, 8]}}
})";

TEST(Suite, ExpandsTheCartesianProductFirstAxisSlowest) {
  const Suite s = load_suite(write_suite("valid", kValid), false);
  const auto points = expand(s);
  ASSERT_EQ(points.size(), 6u);
  EXPECT_EQ(points[0]["ranks"], 1);
  EXPECT_EQ(points[0]["overlap"], "none");
  EXPECT_EQ(points[1]["overlap"], "backward");
  EXPECT_EQ(points[3]["ranks"], 2);
  EXPECT_EQ(points[5]["model"], "resnet50");
  EXPECT_EQ(points[5]["batch"], 32);
  EXPECT_NE(point_id(points[0]), point_id(points[1]));
  EXPECT_EQ(point_id(points[0]), point_id(expand(s)[0]));
}

TEST(Suite, SystemsBecomeTheInnermostAxisSoThatEachPointAlternates) {
  Suite s = load_suite(write_suite("valid", kValid), false);
  set_systems(s, {"dlbench", "pytorch"});
  const auto points = expand(s);
  ASSERT_EQ(points.size(), 12u);
  for (size_t i = 0; i < points.size(); i += 2) {
    EXPECT_EQ(points[i]["system"], "dlbench");
    EXPECT_EQ(points[i + 1]["system"], "pytorch");
    nlohmann::json same = points[i + 1];
    same["system"] = "dlbench";
    EXPECT_EQ(same, points[i]);  // the pair differs in its system only
  }
  set_systems(s, {"pytorch"});  // replaces the axis, keeps it last
  ASSERT_EQ(s.axes.back().first, "system");
  EXPECT_EQ(s.axes.back().second, nlohmann::json::array({"pytorch"}));
  EXPECT_EQ(expand(s).size(), 6u);
  EXPECT_THROW(set_systems(s, {"dlbench", "tensorflow"}), InvalidArgument);
  EXPECT_THROW(set_systems(s, {"pytorch", "pytorch"}), InvalidArgument);
  EXPECT_THROW(set_systems(s, {}), InvalidArgument);
}

TEST(Suite, TheSystemAxisIsInnermostEvenWithCases) {
  Suite s = parse_suite(R"({"name": "t", "description": "d", "defaults": {"batch": 2},
    "sweep": {"ranks": [1, 2]}, "cases": [{"model": "alexnet"}, {"model": "vgg16"}], "cpu": {}})",
                        "t.json", false);
  set_systems(s, {"dlbench", "pytorch"});
  const auto points = expand(s);
  ASSERT_EQ(points.size(), 8u);
  for (size_t i = 0; i < points.size(); i += 2) {
    EXPECT_EQ(points[i]["system"], "dlbench");
    EXPECT_EQ(points[i + 1]["system"], "pytorch");
    EXPECT_EQ(points[i]["model"], points[i + 1]["model"]);
    EXPECT_EQ(points[i]["ranks"], points[i + 1]["ranks"]);
  }
  EXPECT_EQ(points[2]["model"], "vgg16");  // then the next case, then the next rank count
  s.cases[0]["system"] = "dlbench";
  EXPECT_THROW(set_systems(s, {"pytorch"}), InvalidArgument);
}

TEST(Suite, CpuOverrideReplacesDefaultsAndAxes) {
  const Suite s = load_suite(write_suite("valid", kValid), true);
  const auto points = expand(s);
  ASSERT_EQ(points.size(), 3u * 3u * 2u);  // ranks replaced (3), overlap kept (3), batch added (2)
  for (const auto& p : points) {
    EXPECT_EQ(p["model"], "resnet18");
    EXPECT_EQ(p["backend"], "cpu");
    EXPECT_EQ(p["precision"], "fp32");
    EXPECT_TRUE(p["batch"] == 4 || p["batch"] == 8);  // the axis replaced the default 32
  }
}

TEST(Suite, CasesAreCrossedWithTheSweepAndTheCpuReplacesThem) {
  const std::string text = R"({
  "name": "cases", "description": "axes crossed with cases",
  "defaults": {"model": "resnet50", "batch": 32, "image_size": 224},
  "sweep": {"ranks": [1, 2]},
  "cases": [{"model": "resnet18", "image_size": 64}, {"model": "digits-cnn", "image_size": 8}],
  "cpu": {"cases": [{"model": "alexnet", "image_size": 63}]}
})";
  const auto points = expand(load_suite(write_suite("cases", text), false));
  ASSERT_EQ(points.size(), 4u);  // 2 ranks x 2 cases, cases fastest
  EXPECT_EQ(points[0]["ranks"], 1);
  EXPECT_EQ(points[0]["model"], "resnet18");
  EXPECT_EQ(points[0]["image_size"], 64);
  EXPECT_EQ(points[1]["model"], "digits-cnn");
  EXPECT_EQ(points[1]["image_size"], 8);
  EXPECT_EQ(points[1]["batch"], 32);  // defaults the case does not set stay
  EXPECT_EQ(points[2]["ranks"], 2);
  const auto cpu = expand(load_suite(write_suite("cases", text), true));
  ASSERT_EQ(cpu.size(), 2u);
  EXPECT_EQ(cpu[1]["model"], "alexnet");
  EXPECT_EQ(cpu[1]["image_size"], 63);
}

TEST(Suite, ShippedSuitesAreValidAndScalingFitsTheCpu) {
  EXPECT_EQ(list_suites(),
            (std::vector<std::string>{"algorithms", "batch", "ci", "convergence", "input", "memory",
                                      "overlap", "precision", "scaling", "smoke"}));
  for (const char* name : {"scaling", "batch", "precision", "overlap", "smoke", "convergence", "ci",
                           "input", "algorithms"}) {
    EXPECT_NO_THROW(load_suite(name, true)) << name;
    EXPECT_NO_THROW(load_suite(name, false)) << name;
  }
  // Every point passes the run's own checks, on a GPU host and without one; a point of JPEG
  // files with the images the sweep gives it (suites/harness/sweep/suite_images.h).
  for (const char* name : {"scaling", "batch", "precision", "overlap", "smoke", "convergence", "ci",
                           "input", "algorithms"}) {
    for (bool cpu : {true, false}) {
      for (const auto& p : expand(load_suite(name, cpu))) {
        RunOptions o = options_from_json(p);
        o.data_path = data_path_of(o.data, "out/input/dataset");
        EXPECT_NO_THROW(validate_run_options(o)) << name << ": " << p.dump();
      }
    }
  }
  EXPECT_EQ(load_suite("input", true).dataset["images"], 480);
  EXPECT_EQ(load_suite("input", false).dataset["images"], 4096);
  EXPECT_TRUE(load_suite("scaling", true).dataset.is_null());
  for (const auto& p : expand(load_suite("scaling", true))) {
    EXPECT_EQ(p["backend"], "cpu");
    EXPECT_LE(p["image_size"].get<int>(), 64);
  }
}

TEST(Suite, TheSimulateBlockIsKeptAndTheCpuReplacesIt) {
  const std::string text = R"({
  "name": "sim", "description": "measured, then simulated",
  "defaults": {"model": "resnet18"}, "sweep": {"ranks": [1, 2]},
  "simulate": {"networks": ["dgx-h100"], "ranks": [8, 1024], "bucket_mb": [25, 100]},
  "cpu": {"simulate": {"networks": ["pcie-25gbe"], "ranks": [16]}}
})";
  const Suite gpu = load_suite(write_suite("sim", text), false);
  EXPECT_EQ(gpu.simulate["ranks"], nlohmann::json({8, 1024}));
  EXPECT_EQ(gpu.simulate["networks"], nlohmann::json({"dgx-h100"}));
  const Suite cpu = load_suite(write_suite("sim", text), true);
  EXPECT_EQ(cpu.simulate["networks"], nlohmann::json({"pcie-25gbe"}));
  EXPECT_TRUE(load_suite("smoke", true).simulate.is_null());
  EXPECT_FALSE(load_suite("scaling", true).simulate.is_null());
}

// On a GPU the precision suite runs every model and precision with and without --cuda-graph;
// its CPU points have no graphs (the CPU refuses them).
TEST(Suite, PrecisionSweepsCudaGraphsOnTheGpuOnly) {
  int graphs = 0, eager = 0;
  for (const auto& p : expand(load_suite("precision", false))) {
    const RunOptions o = options_from_json(p);
    (o.cuda_graph ? graphs : eager)++;
  }
  EXPECT_EQ(graphs, 16);
  EXPECT_EQ(eager, 16);
  for (const auto& p : expand(load_suite("precision", true))) {
    EXPECT_FALSE(options_from_json(p).cuda_graph);
  }
}

// Every key the schema accepts, every allowed value of an enumerated key, parses into a point's
// options: a schema-valid suite never fails on a key the worker does not know.
TEST(Suite, EverySchemaKeyAndEnumValueParses) {
  std::ifstream in(suites_dir() + "/schema/suite.schema.json");
  const auto keys = nlohmann::json::parse(in)["$defs"]["key"];
  for (const auto& [key, def] : keys.items()) {
    std::vector<nlohmann::json> values;
    if (def.contains("enum")) {
      for (const auto& v : def["enum"]) values.push_back(v);
    } else if (def["type"] == "integer") {
      values.push_back(1);
    } else if (def["type"] == "number") {
      values.push_back(0.5);
    } else if (def["type"] == "boolean") {
      values.push_back(true);
      values.push_back(false);
    } else if (key == "memory_budget" || key == "workspace_limit" || key == "max_batch_budget") {
      values.push_back("2GiB");
    } else if (key == "recompute") {
      for (const char* v : {"none", "sqrt", "every:3"}) values.push_back(v);
    } else if (key == "swap") {
      for (const char* v : {"none", "all", "auto", "conv1,layer1.0.conv1"}) values.push_back(v);
    } else if (key == "lr_warmup") {
      for (const char* v : {"0", "5", "2.5epochs", "100steps"}) values.push_back(v);
    } else if (key == "sync") {
      for (const char* v : {"sync", "stale:0", "stale:4"}) values.push_back(v);
    } else if (key == "straggler") {
      values.push_back("1:2");
    } else if (key == "lr_schedule") {
      for (const char* v : {"constant", "cosine", "step:30,60"}) values.push_back(v);
    }
    ASSERT_FALSE(values.empty()) << key << ": no sample value for its type";
    for (const auto& v : values) {
      EXPECT_NO_THROW(options_from_json({{key, v}})) << key << " = " << v.dump();
    }
  }
  const RunOptions o = options_from_json({{"comm_progress", "poll"}, {"comm_timeout", 7.5}});
  EXPECT_EQ(o.comm_progress, CommProgress::kPoll);
  EXPECT_DOUBLE_EQ(o.comm_timeout_s, 7.5);
  EXPECT_THROW(options_from_json({{"comm_progress", "spin"}}), InvalidArgument);
}

TEST(Suite, SchemaModelListMatchesTheRegistry) {
  std::ifstream in(suites_dir() + "/schema/suite.schema.json");
  const auto schema = nlohmann::json::parse(in);
  std::vector<std::string> names;
  for (const auto& m : model_registry()) names.push_back(m.name);
  EXPECT_EQ(schema["$defs"]["key"]["model"]["enum"].get<std::vector<std::string>>(), names);
}

struct Bad {
  const char* name;
  std::string text;
  const char* message;
};
void PrintTo(const Bad& b, std::ostream* os) {
  *os << b.name << ": expecting '" << b.message << "'";
}

class SuiteRejects : public ::testing::TestWithParam<Bad> {};

TEST_P(SuiteRejects, WithAMessageNamingFileKeyAndExpectation) {
  const Bad b = GetParam();
  const std::string path = write_suite(b.name, b.text);
  try {
    load_suite(path, true);
    FAIL() << "accepted a malformed suite";
  } catch (const InvalidArgument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(path), std::string::npos) << m;
    EXPECT_NE(m.find(b.message), std::string::npos) << m;
  }
}

std::string with(const std::string& from, const std::string& to) {
  std::string s = kValid;
  const size_t at = s.find(from);
  return at == std::string::npos ? "(bad test)" : s.replace(at, from.size(), to);
}

INSTANTIATE_TEST_SUITE_P(
    Files, SuiteRejects,
    ::testing::Values(
        Bad{"not_json", "{\"name\": ", "not valid JSON"},
        Bad{"missing_name", with(R"("name": "t", )", ""), "missing required key 'name'"},
        Bad{"unknown_top", with(R"("name": "t",)", R"("name": "t", "sweeps": {},)"),
            "/sweeps: unknown key"},
        Bad{"unknown_config_key", with(R"("batch": 32,)", R"("batch": 32, "batchsize": 3,)"),
            "/defaults/batchsize: unknown key"},
        Bad{"wrong_type", with(R"("batch": 32)", R"("batch": "32")"),
            "/defaults/batch: expected an integer, got \"32\""},
        Bad{"zero_batch", with(R"("batch": 32)", R"("batch": 0)"),
            "/defaults/batch: expected a value >= 1, got 0"},
        Bad{"bad_enum", with(R"("precision": "bf16")", R"("precision": "fp64")"),
            "/defaults/precision: expected one of"},
        Bad{"unknown_model", with(R"("model": "resnet50")", R"("model": "resnet152")"),
            "/defaults/model: expected one of \"alexnet\""},
        Bad{"empty_axis", with(R"("ranks": [1, 2])", R"("ranks": [])"),
            "/sweep/ranks: expected at least 1 item"},
        Bad{"axis_not_array", with(R"("ranks": [1, 2])", R"("ranks": 2)"),
            "/sweep/ranks: expected an array, got 2"},
        Bad{"bad_axis_value",
            with(R"("overlap": ["none", "backward", "forward"])",
                 R"("overlap": ["none", "sideways"])"),
            "/sweep/overlap/1: expected one of"},
        Bad{"empty_sweep", R"({"name": "e", "description": "nothing to sweep",
                   "defaults": {"model": "resnet18"}, "sweep": {}, "cpu": {}})",
            "the suite has no sweep axis and no case"},
        Bad{"case_repeats_an_axis",
            with(R"("sweep": {"ranks": [1, 2], "overlap": ["none", "backward", "forward"]})",
                 R"("sweep": {"ranks": [1, 2]}, "cases": [{"ranks": 4}])"),
            "a case sets 'ranks', which is also a sweep axis"},
        Bad{"bad_cpu", with(R"("cpu": {)", R"("cpu": {"gpu": 1, )"), "/cpu/gpu: unknown key"},
        Bad{"simulate_without_networks",
            with(R"("name": "t",)", R"("name": "t", "simulate": {"ranks": [8]},)"),
            "/simulate: missing required key 'networks'"},
        Bad{"simulate_zero_ranks",
            with(R"("name": "t",)",
                 R"("name": "t", "simulate": {"networks": ["dgx-h100"], "ranks": [0]},)"),
            "/simulate/ranks/0: expected a value >= 1"},
        Bad{"simulate_unknown_key",
            with(R"("name": "t",)",
                 R"("name": "t", "simulate": {"networks": ["x"], "ranks": [8], "gpus": 8},)"),
            "/simulate/gpus: unknown key"},
        // JSON has no integer width; dlbench's are 64-bit signed, and 2^63 must not wrap.
        Bad{"integer_2_to_63", with(R"("batch": 32)", R"("batch": 9223372036854775808)"),
            "/defaults/batch: expected an integer, got 9223372036854775808"},
        Bad{"integer_2_to_64", with(R"("batch": 32)", R"("batch": 18446744073709551616)"),
            "/defaults/batch: expected an integer"},
        Bad{"nested_5000_deep",
            with(R"("ranks": [1, 2])",
                 "\"ranks\": " + std::string(5000, '[') + std::string(5000, ']')),
            "JSON nested deeper than 64 levels"},
        Bad{"nul_byte", with(R"("name": "t",)", std::string("\"name\": \"t\",\0", 13)),
            "a NUL byte"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Suite, ExpansionIsCappedAndCountedWithoutOverflow) {
  Suite s;
  s.path = "big.json";
  s.defaults = nlohmann::json::object();
  std::vector<int> thousand(1000);
  s.axes = {{"batch", thousand}, {"steps", thousand}};
  EXPECT_EQ(count_points(s), 1000000u);
  try {
    expand(s);  // 43 s and 2 GB before the cap
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("1000000 points, more than the limit of 10000 "
                                         "(--max-points raises it)"),
              std::string::npos)
        << e.what();
  }
  s.axes[1].second = std::vector<int>(5);
  EXPECT_EQ(expand(s, 5000).size(), 5000u);
  s.axes[1].second = thousand;
  for (const char* k : {"warmup", "seed", "ranks", "image_size", "num_classes"})
    s.axes.emplace_back(k, thousand);  // 1000^7 > 2^64
  EXPECT_THROW(count_points(s), InvalidArgument);
  EXPECT_THROW(expand(s), InvalidArgument);
}

TEST(Suite, UnknownSuiteNameListsTheShippedOnes) {
  try {
    load_suite("scalling", true);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("scaling"), std::string::npos) << e.what();
  }
}

LaunchHost host(int64_t cores, bool as_root = false, bool in_slurm = false) {
  LaunchHost h;
  h.cores = cores;
  h.online_cpus = cores;
  h.as_root = as_root;
  h.in_slurm = in_slurm;
  return h;
}

TEST(Launcher, MpirunOversubscribesAndAllowsRoot) {
  const auto c = launch_command(LauncherKind::kAuto, 4, {"dlbench", "worker"}, host(2, true));
  EXPECT_EQ(c.argv, (std::vector<std::string>{"mpirun", "-np", "4", "--oversubscribe",
                                              "--allow-run-as-root", "-x", "OMP_NUM_THREADS",
                                              "--bind-to", "none", "dlbench", "worker"}));
  EXPECT_EQ(c.env.at("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"), "1");
  EXPECT_EQ(c.env.at("OMP_NUM_THREADS"), "1");  // 4 ranks on 2 cores: one thread each
  // 2 ranks on 8 CPUs: 4 threads each, on 4 hardware threads of its own (Open MPI's default
  // would bind each to one core).
  const auto fits = launch_command(LauncherKind::kMpirun, 2, {"w"}, host(8));
  EXPECT_EQ(fits.argv,
            (std::vector<std::string>{"mpirun", "-np", "2", "-x", "OMP_NUM_THREADS", "--map-by",
                                      "slot:PE=4", "--use-hwthread-cpus", "w"}));
  EXPECT_EQ(fits.env, (std::map<std::string, std::string>{{"OMP_NUM_THREADS", "4"}}));
  EXPECT_EQ(launch_command(LauncherKind::kMpirun, 3, {"w"}, host(8)).argv[6], "slot:PE=2");
  // The user's OMP_NUM_THREADS is left alone, and places the ranks: 2 ranks of 2 threads each
  // get 2 hardware threads; of 8 threads, or of a count it does not name, they run unbound
  // (Open MPI's default would put each rank's threads on one core).
  LaunchHost chosen = host(8);
  chosen.omp_threads_set = true;
  EXPECT_EQ(launch_command(LauncherKind::kMpirun, 2, {"w"}, chosen).argv,
            (std::vector<std::string>{"mpirun", "-np", "2", "--bind-to", "none", "w"}));
  chosen.user_threads = 2;
  EXPECT_EQ(launch_command(LauncherKind::kMpirun, 2, {"w"}, chosen).argv,
            (std::vector<std::string>{"mpirun", "-np", "2", "--map-by", "slot:PE=2",
                                      "--use-hwthread-cpus", "w"}));
  chosen.user_threads = 8;
  EXPECT_EQ(launch_command(LauncherKind::kMpirun, 2, {"w"}, chosen).argv,
            (std::vector<std::string>{"mpirun", "-np", "2", "--bind-to", "none", "w"}));
  // Under taskset or a cpuset (fewer CPUs than the machine's), Open MPI would bind the ranks to
  // the machine's cores outside it: they stay unbound, in the mask they inherit.
  LaunchHost narrowed = host(4);
  narrowed.online_cpus = 8;
  EXPECT_EQ(launch_command(LauncherKind::kMpirun, 2, {"w"}, narrowed).argv,
            (std::vector<std::string>{"mpirun", "-np", "2", "-x", "OMP_NUM_THREADS", "--bind-to",
                                      "none", "w"}));
  EXPECT_EQ(launch_command(LauncherKind::kAuto, 8, {"w"}, host(2, false, true)).argv[0], "srun");
  EXPECT_EQ(launch_command(LauncherKind::kAuto, 1, {"w"}, host(2, true)).argv,
            std::vector<std::string>{"w"});
  EXPECT_THROW(launch_command(LauncherKind::kLocal, 2, {"w"}, host(2)), InvalidArgument);
}

TEST(Launcher, TheCoresAreThoseTheProcessMayUse) {
  // Under taskset or a job's cpuset, the CPUs left are what OpenMP's pool and mpirun's slots
  // count; the machine's hardware_concurrency is not. Narrowed to one CPU, 2 ranks are
  // oversubscribed with a thread each.
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  if (CPU_COUNT(&all) < 2) GTEST_SKIP() << "this process may use one CPU only";
  EXPECT_EQ(usable_cpus(), CPU_COUNT(&all));
  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);  // this thread, the one asking
  const int64_t narrowed = usable_cpus(), most = most_local_ranks();
  const LaunchHost here = this_host();
  const bool pool_is_default = std::getenv("OMP_NUM_THREADS") == nullptr;
  const int64_t pool = pool_threads();
  ASSERT_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
  EXPECT_EQ(narrowed, 1);
  EXPECT_EQ(here.cores, 1);
  EXPECT_EQ(most, kMaxRanksPerCore);
  if (pool_is_default) {
    EXPECT_EQ(pool, 1);
  }
  LaunchHost h = here;
  h.omp_threads_set = false;
  h.mpi_hostfile = false;
  const auto c = launch_command(LauncherKind::kMpirun, 2, {"w"}, h);
  EXPECT_NE(std::find(c.argv.begin(), c.argv.end(), "--oversubscribe"), c.argv.end());
  EXPECT_NE(std::find(c.argv.begin(), c.argv.end(), "none"), c.argv.end());  // --bind-to none
  EXPECT_EQ(c.env.at("OMP_NUM_THREADS"), "1");
}

TEST(Launcher, ARecordsCommandIsRunAsTheSuiteLaunchedIt) {
  LaunchHost h = host(2, true);
  h.online_cpus = 2;
  const std::vector<std::string> worker = {"/x/dlbench", "worker", "--point=p.json"};
  const LaunchCommand c = launch_command(LauncherKind::kMpirun, 2, worker, h);
  EXPECT_EQ(as_launched("mpirun -np 2 dlbench run --ranks=2 --batch=8", c, worker.size()),
            "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 mpirun "
            "-np 2 --allow-run-as-root -x OMP_NUM_THREADS --map-by slot:PE=1 --use-hwthread-cpus "
            "dlbench run --ranks=2 --batch=8");
  // One rank: no launcher words; a command that is not a run's, unchanged.
  const LaunchCommand one = launch_command(LauncherKind::kAuto, 1, worker, h);
  EXPECT_EQ(as_launched("dlbench run --batch=8", one, worker.size()), "dlbench run --batch=8");
  EXPECT_EQ(as_launched("dlbench simulate --ranks=8", c, worker.size()),
            "dlbench simulate --ranks=8");
  EXPECT_EQ(as_launched("mpirun -np 2 dlbench run", c, 99), "mpirun -np 2 dlbench run");
  // Each word as one shell word, however it is spelled.
  const LaunchCommand spaced{{"mpirun", "--mca", "x y", "w"}, {{"V", "a b"}}};
  EXPECT_EQ(as_launched("dlbench run", spaced, 1), "'V=a b' mpirun --mca 'x y' dlbench run");
}

TEST(Launcher, TheUsersThreadsAreReadAsOneNumber) {
  const char* was = std::getenv("OMP_NUM_THREADS");
  const std::string saved = was ? was : "";
  const auto read = [](const char* value) {
    setenv("OMP_NUM_THREADS", value, 1);
    const LaunchHost h = this_host();
    EXPECT_TRUE(h.omp_threads_set);
    return h.user_threads;
  };
  EXPECT_EQ(read("3"), 3);
  EXPECT_EQ(read(" 4 "), 4);
  EXPECT_EQ(read("4,2"), 4);  // nested levels: the ranks' pools are the outer one
  EXPECT_EQ(read(""), 0);
  EXPECT_EQ(read("0"), 0);
  EXPECT_EQ(read("-2"), 0);
  EXPECT_EQ(read("4x"), 0);
  EXPECT_EQ(read("99999999999999999999"), 0);  // past int64: names no count
  if (was) {
    setenv("OMP_NUM_THREADS", saved.c_str(), 1);
  } else {
    unsetenv("OMP_NUM_THREADS");
  }
  // A count as large as int64 does not overflow the fit test: the ranks run unbound.
  LaunchHost huge = host(8);
  huge.omp_threads_set = true;
  huge.user_threads = INT64_MAX;
  EXPECT_EQ(launch_command(LauncherKind::kMpirun, 3, {"w"}, huge).argv,
            (std::vector<std::string>{"mpirun", "-np", "3", "--bind-to", "none", "w"}));
  EXPECT_TRUE((HostShare{3, 8, 8}.oversubscribed(INT64_MAX)));
}

TEST(Launcher, PeerRanksGetARendezvousThroughMpirun) {
  unsetenv("MASTER_ADDR");
  unsetenv("MASTER_PORT");
  LaunchCommand c = launch_command(LauncherKind::kMpirun, 2, {"python3", "peer.py"}, host(8));
  add_peer_rendezvous(c, host(8));
  EXPECT_EQ(c.argv,
            (std::vector<std::string>{"mpirun", "-np", "2", "-x", "MASTER_ADDR", "-x",
                                      "MASTER_PORT", "-x", "OMP_NUM_THREADS", "--map-by",
                                      "slot:PE=4", "--use-hwthread-cpus", "python3", "peer.py"}));
  EXPECT_EQ(c.env.at("MASTER_ADDR"), "127.0.0.1");
  const int port = std::stoi(c.env.at("MASTER_PORT"));
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
  // Ranks on several hosts: no address is guessed (the peer takes Slurm's first node, or the
  // user's MASTER_ADDR), and mpirun is not asked to pass one that is not set.
  LaunchHost cluster = host(8);
  cluster.mpi_hostfile = true;
  LaunchCommand far = launch_command(LauncherKind::kMpirun, 16, {"python3", "peer.py"}, cluster);
  add_peer_rendezvous(far, cluster);
  EXPECT_EQ(far.env.count("MASTER_ADDR"), 0u);
  EXPECT_EQ(far.argv, (std::vector<std::string>{"mpirun", "-np", "16", "-x", "MASTER_PORT",
                                                "python3", "peer.py"}));
}

TEST(HostShare, RanksCountThemselvesByMachineAndPoolTheirCpus) {
  // Ranks 0, 1 and 3 on machine 7 with CPUs {0}, {1} and {64}; rank 2 alone on machine 9.
  const std::vector<uint64_t> keys = {7, 7, 9, 7};
  const std::vector<std::vector<uint64_t>> sets = {{1}, {2}, {15}, {0, 1}};
  const HostShare zero = host_share_of(0, keys, sets);
  EXPECT_EQ(zero.ranks, 3);
  EXPECT_EQ(zero.cpus, 3);
  EXPECT_EQ(zero.own_cpus, 1);
  const HostShare two = host_share_of(2, keys, sets);
  EXPECT_EQ(two.ranks, 1);
  EXPECT_EQ(two.cpus, 4);
  EXPECT_EQ(two.own_cpus, 4);
  EXPECT_EQ(two.cpus_per_rank(), 4);
  // An empty set counts one CPU; a rank that is not among them is one alone.
  EXPECT_EQ(host_share_of(0, {5}, {{}}).cpus, 1);
  EXPECT_EQ(host_share_of(3, keys, sets).own_cpus, 1);  // CPU 64, in its second word
  EXPECT_EQ(host_share_of(4, keys, sets).ranks, 1);
}

TEST(HostShare, ARanksShareIsTheSameBoundOrNot) {
  // 8 ranks on 112 CPUs: mapped to 14 each (mpirun --map-by slot:PE=14, srun
  // --cpus-per-task=14), or each free to use all 112. Either way a rank may count on 14, and a
  // GPU rank's loader decodes on 13 of them.
  const std::vector<uint64_t> keys(8, 1);
  std::vector<std::vector<uint64_t>> mapped(8, std::vector<uint64_t>(2, 0));
  for (int cpu = 0; cpu < 112; ++cpu) mapped[cpu / 14][cpu / 64] |= uint64_t{1} << (cpu % 64);
  const std::vector<std::vector<uint64_t>> free(8, {~uint64_t{0}, (uint64_t{1} << 48) - 1});
  RunOptions o;
  for (const auto& sets : {mapped, free}) {
    const HostShare s = host_share_of(5, keys, sets);
    EXPECT_EQ(s.cpus, 112);
    EXPECT_EQ(s.cpus_per_rank(), 14);
    EXPECT_FALSE(s.oversubscribed(14));
    EXPECT_TRUE(s.oversubscribed(15));
    EXPECT_EQ(loader_threads_of(o, s, 1), 13);
  }
  o.loader_threads = 3;
  EXPECT_EQ(loader_threads_of(o, host_share_of(0, keys, mapped), 1), 3);
  // taskset -c 0 around mpirun: 2 ranks on one CPU.
  const HostShare squeezed = host_share_of(1, {1, 1}, {{1}, {1}});
  EXPECT_EQ(squeezed.cpus_per_rank(), 1);
  EXPECT_TRUE(squeezed.oversubscribed(1));
  o.loader_threads = 0;
  EXPECT_EQ(loader_threads_of(o, squeezed, 1), 1);
}

// Answers each allgather with the next of `answers` (every rank's values), as ranks would, and
// keeps what this rank sent.
class ScriptedCommunicator final : public Communicator {
 public:
  ScriptedCommunicator(int rank, std::vector<std::vector<uint64_t>> answers)
      : rank_(rank), answers_(std::move(answers)) {}
  std::string_view name() const override { return "scripted"; }
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(answers_.at(0).size()); }
  void broadcast(Tensor&, int) override {}
  std::vector<uint64_t> allgather(uint64_t v) override {
    sent.push_back(v);
    return answers_.at(sent.size() - 1);
  }
  void barrier() override {}
  double max_across_ranks(double v) override { return v; }
  double sum_across_ranks(double v) override { return v; }
  double time_reference_allreduce(Tensor&, int) override { return 0; }
  std::string reference_name() const override { return "none"; }
  std::map<std::string, std::string> environment() const override { return {}; }
  std::vector<uint64_t> sent;

 protected:
  std::unique_ptr<CommHandle> start_allreduce(Tensor&, ReduceOp, StreamRef) override {
    throw Unsupported("scripted: no all-reduce");
  }

 private:
  int rank_;
  std::vector<std::vector<uint64_t>> answers_;
};

TEST(HostShare, RanksGatherTheirKeysAndEveryWordOfTheWidestSet) {
  // Rank 1 of 3. Ranks 0 and 1 share machine 7; rank 0's set reaches CPU 64 (2 words), the
  // others' fit one word. Every rank gathers the keys, the word counts, then each word.
  ScriptedCommunicator comm(1, {{7, 7, 9}, {2, 1, 1}, {0b1, 0b10, 0b1111}, {0b1, 0, 0}});
  const HostShare s = measure_host_share(comm);
  ASSERT_EQ(comm.sent.size(), 4u);
  EXPECT_EQ(comm.sent[0], machine_key());
  EXPECT_EQ(comm.sent[1], usable_cpu_set().size());
  const std::vector<uint64_t> own = usable_cpu_set();
  EXPECT_EQ(comm.sent[2], own[0]);
  EXPECT_EQ(comm.sent[3], own.size() > 1 ? own[1] : 0u);  // its own set, padded to the widest
  EXPECT_EQ(s.ranks, 2);
  EXPECT_EQ(s.cpus, 3);  // CPUs 0, 1 and 64
  EXPECT_EQ(s.own_cpus, 1);
}

TEST(HostShare, OneRankMeasuresItsOwnCpus) {
  auto comm = make_communicator(CommKind::kLocal);
  const HostShare s = measure_host_share(*comm);
  EXPECT_EQ(s.ranks, 1);
  EXPECT_EQ(s.cpus, usable_cpus());
  EXPECT_EQ(s.own_cpus, usable_cpus());
}

TEST(Launcher, RefusesRanksItCannotStart) {
  // One host: up to kMaxRanksPerCore ranks per core, oversubscribed; one more is refused.
  EXPECT_NO_THROW(launch_command(LauncherKind::kAuto, 2 * kMaxRanksPerCore, {"w"}, host(2)));
  try {
    launch_command(LauncherKind::kAuto, 2 * kMaxRanksPerCore + 1, {"w"}, host(2));
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("2 cores"), std::string::npos) << e.what();
  }
  EXPECT_THROW(launch_command(LauncherKind::kAuto, 0, {"w"}, host(2)), InvalidArgument);
  // A hostfile gives mpirun other hosts: no bound here and no --oversubscribe.
  LaunchHost cluster = host(2);
  cluster.mpi_hostfile = true;
  EXPECT_EQ(launch_command(LauncherKind::kAuto, 64, {"w"}, cluster).argv,
            (std::vector<std::string>{"mpirun", "-np", "64", "w"}));  // nor OMP_NUM_THREADS
  // Slurm: the allocation's task count bounds srun; unknown, srun itself decides.
  LaunchHost slurm = host(2, false, true);
  EXPECT_NO_THROW(launch_command(LauncherKind::kAuto, 64, {"w"}, slurm));
  slurm.slurm_tasks = 8;
  EXPECT_NO_THROW(launch_command(LauncherKind::kAuto, 8, {"w"}, slurm));
  EXPECT_THROW(launch_command(LauncherKind::kAuto, 9, {"w"}, slurm), InvalidArgument);
}

TEST(Launcher, TimeoutKillsTheWholeProcessGroup) {
  const std::string log = ::testing::TempDir() + "dlb_launcher.log";
  const std::string marker = ::testing::TempDir() + "dlb_launcher_marker";
  std::remove(marker.c_str());
  // A grandchild that would write the marker after 2 s must die with its parent's group.
  LaunchCommand c{{"sh", "-c", "(sleep 2; touch " + marker + ") & sleep 30"}, {}};
  const ProcessResult r = run_process(c, 0.5, log, nullptr);
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(r.seconds, 5);
  sleep(3);
  EXPECT_FALSE(std::ifstream(marker).good()) << "the background child survived the timeout";
  const ProcessResult ok = run_process({{"sh", "-c", "echo hi; exit 3"}, {}}, 10, log, nullptr);
  EXPECT_EQ(ok.exit_code, 3);
  EXPECT_FALSE(ok.timed_out);
  EXPECT_NE(tail_of_file(log, 100).find("hi"), std::string::npos);
}

}  // namespace
}  // namespace dlb
