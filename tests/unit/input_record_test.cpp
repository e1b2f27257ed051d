// The record's metrics.input (suites/harness/core/record.h): the loader's counts as the run gave
// them, the wait per step and its share of the median step, the loader's rate and cores, and the
// verdict by the 5% rule, on either side of it.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "suites/harness/core/record.h"
#include "suites/harness/core/results.h"

namespace dlb {
namespace {

RunResult folder_run(double waited_s) {
  RunResult r;
  r.options.data = DataSource::kFolder;
  RunStats s;
  s.timed_steps = 4;
  s.images_per_step = 8;
  s.timed_seconds = 0.4;
  s.step_seconds = {0.1, 0.1, 0.1, 0.1};
  s.losses = {1, 1, 1, 1};
  r.stats = s;
  r.input = {
      {"source", "folder"},   {"source_images", 100}, {"classes", 4},
      {"threads", 2},         {"prefetch", 2},        {"batches", 4},
      {"images", 32},         {"images_made", 40},    {"waited_s", waited_s},
      {"loader_busy_s", 0.2}, {"skipped", 0},         {"skipped_files", nlohmann::json::array()}};
  return r;
}

TEST(InputRecord, TheWaitsShareOfTheStepDecidesTheVerdict) {
  const nlohmann::json bound = record_json(folder_run(0.024))["metrics"]["input"];
  EXPECT_DOUBLE_EQ(bound["waited_per_step_s"].get<double>(), 0.006);
  EXPECT_DOUBLE_EQ(bound["wait_share_of_step"].get<double>(), 0.06);
  EXPECT_EQ(bound["verdict"], "input-bound");
  EXPECT_DOUBLE_EQ(bound["loader_img_s"].get<double>(), 40 / 0.2 * 2);
  EXPECT_DOUBLE_EQ(bound["loader_cores"].get<double>(), 0.5);
  EXPECT_EQ(bound["source_images"], 100);
  const nlohmann::json fed = record_json(folder_run(0.016))["metrics"]["input"];
  EXPECT_DOUBLE_EQ(fed["wait_share_of_step"].get<double>(), 0.04);
  EXPECT_EQ(fed["verdict"], "not input-bound");
  RunResult synthetic = folder_run(0);
  synthetic.input = nullptr;
  EXPECT_FALSE(record_json(synthetic)["metrics"].contains("input"));
}

// A record holding a name that is not UTF-8 (a skipped file's, from a folder with a Latin-1 name)
// is written, its bad bytes as U+FFFD, never refused by the JSON encoder with the record lost.
TEST(InputRecord, ARecordWithBytesThatAreNotUtf8IsWrittenNotLost) {
  RunResult r = folder_run(0.001);
  r.input["skipped_files"] = {"class_002/bad\xFF.JPEG: not a JPEG"};
  const nlohmann::json record = record_json(r);
  char dir[] = "/tmp/dlb-utf8-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string json = std::string(dir) + "/r.json", jsonl = std::string(dir) + "/r.jsonl";
  EXPECT_NO_THROW(write_json_atomically(json, record));
  EXPECT_NO_THROW(append_jsonl(jsonl, record));
  for (const std::string& path : {json, jsonl}) {
    std::ifstream in(path);
    const std::string text{std::istreambuf_iterator<char>(in), {}};
    EXPECT_NE(text.find("class_002/bad\xEF\xBF\xBD.JPEG"), std::string::npos) << path;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dlb
