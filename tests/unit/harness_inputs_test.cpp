// The harness's readers of files it did not write itself, and the option table's ranges, refuse
// what their users cannot hold, naming the file, the line and the key: the cases of issue 32's
// hostile-input round by name. The fuzz targets (tests/fuzz: peak_file, point_file, results)
// drive the same functions with mutated bytes.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>

#include "runtime/core/error.h"
#include "runtime/io/json_fields.h"
#include "runtime/io/text_file.h"
#include "suites/harness/core/json_schema.h"
#include "suites/harness/core/machine_peak.h"
#include "suites/harness/core/option_table.h"
#include "suites/harness/core/point_file.h"
#include "suites/harness/core/results.h"
#include "suites/harness/core/source_dir.h"
#include "suites/harness/core/sweep_options.h"

namespace dlb {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

// The message of the InvalidArgument `f` throws; fails the test when it throws none.
template <typename F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/dlb_harness_inputs_XXXXXX";
    path_ = mkdtemp(name);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name, const std::string& text) const {
    const std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(TextFile, ReadsOnlyARegularFileWithinItsLimit) {
  TempDir dir;
  EXPECT_EQ(read_text_file(dir.file("a.json", "{}\n"), "point file"), "{}\n");
  EXPECT_NE(refusal([&] { read_text_file(dir.path(), "point file"); }).find("is a directory"),
            std::string::npos);
  EXPECT_NE(refusal([&] {
              read_text_file("/dev/zero", "point file");
            }).find("'/dev/zero': it is not a regular file"),
            std::string::npos);
  const std::string fifo = dir.path() + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(refusal([&] { read_text_file(fifo, "point file"); }).find("not a regular file"),
            std::string::npos);  // returns at once: no writer is waited for
  EXPECT_NE(refusal([&] {
              read_text_file(dir.file("big", std::string(100, ' ')), "x", 99);
            }).find("100 bytes, more than the 99"),
            std::string::npos);
  const std::string under_a_file = dir.file("f", "") + "/peaks.json";
  EXPECT_FALSE(path_exists(under_a_file));
  EXPECT_NE(refusal([&] { read_text_file(under_a_file, "peak file"); }).find("Not a directory"),
            std::string::npos);
}

TEST(JsonFields, NamesTheObjectTheKeyAndWhatWasExpected) {
  const json j = {{"threads", 1.7}, {"big", 1e30}, {"huge", std::numeric_limits<uint64_t>::max()},
                  {"name", 3},      {"rate", 2.0}, {"neg", -1}};
  const JsonFields f(j, "peaks.json: peaks[0]");
  EXPECT_EQ(refusal([&] { f.integer("threads"); }),
            "peaks.json: peaks[0]: key 'threads': expected an integer in [-9223372036854775808, "
            "9223372036854775807], got 1.7");
  EXPECT_NE(refusal([&] { f.integer("big"); }).find("got 1e+30"), std::string::npos);
  EXPECT_NE(refusal([&] { f.integer("huge"); }).find("got 18446744073709551615"),
            std::string::npos);
  EXPECT_NE(refusal([&] { f.integer("neg", 0, 10); }).find("an integer in [0, 10], got -1"),
            std::string::npos);
  EXPECT_NE(refusal([&] { f.string("name"); }).find("key 'name': expected a string, got 3"),
            std::string::npos);
  EXPECT_NE(refusal([&] { f.string("missing"); }).find("got nothing"), std::string::npos);
  EXPECT_EQ(f.number("rate", 1.0), 2.0);
  EXPECT_EQ(f.integer_or("missing", 7), 7);
  EXPECT_NE(refusal([] {
              JsonFields(json::array(), "point.json");
            }).find("point.json: expected a JSON object, got []"),
            std::string::npos);
}

TEST(OptionTable, FloatsMustSurviveTheFloatTheRunKeeps) {
  RunOptions o;
  const auto apply = [&](const char* key, const json& v) {
    apply_option(o, *find_option(key), v, OptionOrigin::kCommandLine);
  };
  EXPECT_NE(
      refusal([&] { apply("lr", 1e-46); }).find("too small in magnitude for the 32-bit float"),
      std::string::npos);
  EXPECT_NE(refusal([&] { apply("lr", 1e-39); }).find("too small"),
            std::string::npos);  // subnormal
  EXPECT_NE(refusal([&] { apply("lr", 1e39); }).find("too large in magnitude for the 32-bit float"),
            std::string::npos);
  EXPECT_NE(refusal([&] { apply("momentum", 1e39); }).find("--momentum"), std::string::npos);
  EXPECT_NE(refusal([&] { apply("weight_decay", 1e39); }).find("--weight-decay"),
            std::string::npos);
  EXPECT_NE(refusal([&] {
              apply("dropout", 0.99999999);
            }).find("--dropout must be in [0, 1) (got 0.99999999, which is 1 as the 32-bit float"),
            std::string::npos);
  apply("lr", 1.2e-38);
  EXPECT_EQ(o.sgd.lr, 1.2e-38f);
  apply("momentum", 0);
  EXPECT_EQ(o.sgd.momentum, 0.f);
  apply("dropout", 0.9999);
  EXPECT_EQ(*o.dropout, 0.9999f);
}

TEST(OptionTable, IntegersAndDurationsFitWhatHoldsThem) {
  RunOptions o;
  const auto apply = [&](const char* key, const json& v) {
    apply_option(o, *find_option(key), v, OptionOrigin::kConfig);
  };
  EXPECT_EQ(refusal([&] { apply("ranks", int64_t{1} << 31); }),
            "ranks must be in [1, 2147483647] (got 2147483648)");
  EXPECT_NE(refusal([&] {
              apply("image_size", std::numeric_limits<int64_t>::max());
            }).find("image_size must be in [1, 2147483647]"),
            std::string::npos);
  EXPECT_EQ(refusal([&] { apply("batch", int64_t{1} << 40); }),
            "batch must be in [1, 2147483647] (got 1099511627776)");
  EXPECT_NE(
      refusal([&] { apply("comm_timeout", 1e10); }).find("comm_timeout must be in (0, 4294967296]"),
      std::string::npos);
  apply("ranks", std::numeric_limits<int32_t>::max());
  apply("comm_timeout", 4e9);
  EXPECT_EQ(o.comm_timeout_s, 4e9);
}

json cpu_peak() {
  return {{"host", "h"},         {"device", "d"},       {"backend", "cpu"},
          {"precision", "fp32"}, {"threads", 2},        {"flops_per_s", 1e11},
          {"flops_method", "m"}, {"bytes_per_s", 1e10}, {"bytes_method", "m"},
          {"measured_at", "t"}};
}

std::string peaks_text(const json& peak) {
  return json{{"kind", "dlbench_peaks"}, {"peaks", {peak}}}.dump();
}

TEST(PeakFile, RefusesAPeakNoFractionCanBeTakenOf) {
  EXPECT_EQ(parse_peaks(peaks_text(cpu_peak()), "p.json").at(0).threads, 2);
  json gpu = cpu_peak();
  gpu["backend"] = "cuda";
  gpu["threads"] = 0;
  EXPECT_EQ(parse_peaks(peaks_text(gpu), "p.json").at(0).threads, 0);
  for (const auto& [key, value] : {std::pair<const char*, json>{"threads", -4},
                                   {"threads", 0},
                                   {"threads", 1.7},
                                   {"threads", 1e30},
                                   {"threads", std::numeric_limits<uint64_t>::max()},
                                   {"flops_per_s", 5e-324},
                                   {"bytes_per_s", "fast"}}) {
    json peak = cpu_peak();
    peak[key] = value;
    const std::string message = refusal([&] { parse_peaks(peaks_text(peak), "p.json"); });
    EXPECT_NE(message.find("peak file p.json"), std::string::npos) << message;
    EXPECT_NE(message.find(fmt::format("peaks[0]: key '{}'", key)), std::string::npos) << message;
  }
  EXPECT_NE(refusal([] { parse_peaks("[1]", "p.json"); }).find("expected a JSON object"),
            std::string::npos);
}

TEST(PeakFile, ADirectoryIsRefusedAndAPathUnderAFileHoldsNoPeaks) {
  TempDir dir;
  EXPECT_NE(refusal([&] { read_peaks(dir.path()); }).find("it is a directory"), std::string::npos);
  EXPECT_TRUE(read_peaks(dir.file("f", "") + "/peaks.json").empty());
}

json good_point() {
  return {{"config", {{"model", "digits-cnn"}, {"batch", 2}}},
          {"record", "r.json"},
          {"trace_steps", 1},
          {"trace", "t.json"},
          {"fault", ""}};
}

TEST(PointFile, ReadsStrictlyNamingTheFileAndTheKey) {
  const RunOptions o = parse_point(good_point().dump(), "p.json");
  EXPECT_EQ(o.model, "digits-cnn");
  EXPECT_EQ(o.json_path, "r.json");
  EXPECT_EQ(o.trace_steps, 1);
  EXPECT_EQ(o.trace_path, "t.json");
  EXPECT_EQ(o.fault, RunOptions::Fault::kNone);
  json crash = good_point();
  crash["fault"] = "crash";
  EXPECT_EQ(parse_point(crash.dump(), "p.json").fault, RunOptions::Fault::kCrash);

  EXPECT_EQ(refusal([] { parse_point("[1, 2]", "p.json"); }),
            "p.json: expected a JSON object, got [1,2]");
  const auto refused = [](const char* key, const json& value) {
    json p = good_point();
    p[key] = value;
    return refusal([&] { parse_point(p.dump(), "p.json"); });
  };
  EXPECT_EQ(refused("record", 5), "p.json: key 'record': expected a string, got 5");
  EXPECT_NE(refused("trace_steps", "3").find("p.json: key 'trace_steps'"), std::string::npos);
  EXPECT_NE(refused("config", json::array()).find("key 'config': expected an object"),
            std::string::npos);
  EXPECT_NE(refused("fault", "explode").find("unknown inject fault 'explode'"), std::string::npos);
  EXPECT_NE(refused("config", {{"model", "digits-cnn"}, {"lr", 1e-46}})
                .find("p.json: config: lr: 1e-46 is too small"),
            std::string::npos);
}

// Two records as the harness writes them, from the records fuzzer's seed.
std::string corpus_results() {
  return read_text_file(source_dir() + "/tests/fuzz/corpus/results/ci.jsonl", "corpus");
}

TEST(Results, EveryLineIsARecordTheReportsRead) {
  const std::string text = corpus_results();
  const std::vector<json> records = parse_results(text, "results.jsonl");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(ok_point_ids(records).size(), 2u);

  const std::string first = text.substr(0, text.find('\n') + 1);
  const auto broken = [&](const std::function<void(json&)>& change) {
    json r = json::parse(first);
    change(r);
    return refusal([&] { parse_results(first + r.dump() + "\n", "results.jsonl"); });
  };
  EXPECT_NE(broken([](json& r) { r["point"].erase("index"); })
                .find("results.jsonl:2: not a dlbench result record: /point: missing required "
                      "key 'index'"),
            std::string::npos);
  EXPECT_NE(broken([](json& r) { r["point"]["index"] = 1.5; }).find("/point/index"),
            std::string::npos);
  EXPECT_NE(
      broken([](json& r) { r.erase("suite_config"); }).find("results.jsonl:2: key 'suite_config'"),
      std::string::npos);
  EXPECT_NE(broken([](json& r) { r.erase("metrics"); }).find("key 'metrics'"), std::string::npos);
  EXPECT_NE(broken([](json& r) { r["message"] = 3; }).find("/message"), std::string::npos);
  EXPECT_NE(broken([](json& r) { r["suite_config"]["system"] = 1; }).find("key 'system'"),
            std::string::npos);
  EXPECT_NE(refusal([&] {
              parse_results(first + "{\"sta", "results.jsonl");
            }).find("results.jsonl:2: a record cut short"),
            std::string::npos);
}

TEST(Results, ATornTailIsSetAsideAndEveryWholeLineKept) {
  TempDir dir;
  const std::string text = corpus_results();
  const size_t cut = text.find('\n') + 40;
  const std::string path = dir.file("results.jsonl", text.substr(0, cut));
  const std::string torn = set_aside_torn_tail(path, read_text_file(path, "results"));
  EXPECT_EQ(torn, path + ".torn-1");
  EXPECT_EQ(read_text_file(torn, "torn"), text.substr(text.find('\n') + 1, 39));
  EXPECT_EQ(read_results(path).size(), 1u);
  EXPECT_EQ(set_aside_torn_tail(path, read_text_file(path, "results")), "");  // nothing torn
  std::ofstream(path, std::ios::app) << "{";
  const std::string again = read_text_file(path, "results");
  EXPECT_EQ(set_aside_torn_tail(path, again), path + ".torn-2");  // the first torn file is kept
  // A file that grew after it was read (another writer) is not cut.
  std::ofstream(path, std::ios::app) << "{";
  const std::string before = read_text_file(path, "results");
  std::ofstream(path, std::ios::app) << "\"x\": 1}\n";
  EXPECT_THROW(set_aside_torn_tail(path, before), IoError);
  EXPECT_EQ(read_text_file(path, "results").size(), before.size() + 8);
  EXPECT_TRUE(read_results(dir.path() + "/none.jsonl").empty());
}

TEST(JsonSchema, TypeListsExclusiveMaximumAndPropertyNames) {
  const json schema = {
      {"type", "object"},
      {"properties",
       {{"size", {{"type", json::array({"integer", "null"})}, {"exclusiveMaximum", 10}}},
        {"by", {{"type", "object"}, {"propertyNames", {{"enum", {"a", "b"}}}}}}}}};
  EXPECT_TRUE(validate_json({{"size", nullptr}, {"by", {{"a", 1}}}}, schema).empty());
  EXPECT_TRUE(validate_json({{"size", 9}}, schema).empty());
  EXPECT_EQ(validate_json({{"size", 10}}, schema).at(0), "/size: expected a value < 10, got 10");
  EXPECT_EQ(validate_json({{"size", "9"}}, schema).at(0),
            "/size: expected an integer or a null, got \"9\"");
  EXPECT_EQ(validate_json({{"by", {{"c", 1}}}}, schema).size(), 1u);
  EXPECT_NE(refusal([] {
              validate_json(1, {{"pattern", "x"}});
            }).find("'pattern'"),
            std::string::npos);
}

// The sweep's flags are one table: each default (SweepOptions{}'s) passes its own checks, each
// flag is checked as a run's option is, and the refusals name the flag.
TEST(SweepFlags, DefaultsPassAndBadValuesAreRefusedNamingTheFlag) {
  validate_sweep_options(SweepOptions{});
  EXPECT_EQ(SweepOptions{}.trace_steps, 3);  // a sweep traces; a run (RunOptions) does not
  EXPECT_EQ(RunOptions{}.trace_steps, 0);
  auto flag = [](const std::string& key) -> const SweepFlag& {
    for (const SweepFlag& f : sweep_flag_table())
      if (f.option.key == key) return f;
    throw std::runtime_error("no sweep flag " + key);
  };
  auto refusal = [&](const std::string& key, const std::string& text) {
    SweepOptions o;
    try {
      apply_sweep_flag(o, flag(key), text);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refusal("max_points", "0").find("--max-points must be >= 1"), std::string::npos);
  EXPECT_NE(refusal("timeout", "0").find("--timeout must be in (0,"), std::string::npos);
  EXPECT_NE(refusal("trace_steps", "-1").find("--trace-steps must be >= 0"), std::string::npos);
  EXPECT_NE(refusal("launcher", "ssh").find("unknown launcher 'ssh'"), std::string::npos);
  EXPECT_NE(refusal("systems", ",").find("--systems: an empty item"), std::string::npos);
  EXPECT_NE(refusal("systems", "dlbench,").find("--systems: an empty item"), std::string::npos);
  SweepOptions o;
  apply_sweep_flag(o, flag("no_report"), "");  // a bare flag is true
  EXPECT_FALSE(o.report);
  apply_sweep_flag(o, flag("systems"), "dlbench,pytorch");
  EXPECT_EQ(o.systems, (std::vector<std::string>{"dlbench", "pytorch"}));
  apply_sweep_flag(o, flag("launcher"), "srun");
  EXPECT_EQ(o.launcher, LauncherKind::kSrun);
  o.timeout_s = -1;  // set in code: validate_sweep_options still refuses it
  EXPECT_THROW(validate_sweep_options(o), InvalidArgument);
}

}  // namespace
}  // namespace dlb
