// The name lists that the reports read from result.schema.json ($defs/enums) are the runtime's
// own: lanes in tid order, memory categories, and span categories (the schedule's passes, the
// copy and the step).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/check/op_instance.h"
#include "runtime/memory/allocator.h"
#include "runtime/nn/memory_plan.h"
#include "runtime/nn/schedule.h"
#include "runtime/overlap/sync_schedule.h"
#include "runtime/trace/tracer.h"
#include "suites/harness/core/record.h"
#include "suites/harness/core/results.h"
#include "suites/harness/core/suite.h"

namespace dlb {
namespace {
using json = nlohmann::json;

json exported(const std::string& name) {
  std::ifstream in(suites_dir() + "/schema/result.schema.json");
  return json::parse(in)["$defs"]["enums"][name]["enum"];
}

TEST(ResultSchema, LanesAreTheTracersInTidOrder) {
  std::vector<std::string> lanes;
  for (Lane l : kLanes) {
    EXPECT_EQ(static_cast<size_t>(l), lanes.size());
    lanes.emplace_back(lane_name(l));
  }
  EXPECT_EQ(exported("lane").get<std::vector<std::string>>(), lanes);
}

TEST(ResultSchema, MemoryCategoriesAreTheAllocators) {
  std::vector<std::string> names;
  for (size_t c = 0; c < kNumMemCategories; ++c) {
    names.emplace_back(mem_category_name(static_cast<MemCategory>(c)));
  }
  EXPECT_EQ(exported("memory_category").get<std::vector<std::string>>(), names);
}

TEST(ResultSchema, StatusesAreTheRunsStatuses) {
  std::vector<std::string> names;
  for (RunStatus st : kRunStatuses) {
    names.emplace_back(run_status_name(st));
    EXPECT_EQ(parse_run_status(names.back()), st);
  }
  std::ifstream in(suites_dir() + "/schema/result.schema.json");
  EXPECT_EQ(json::parse(in)["properties"]["status"]["enum"].get<std::vector<std::string>>(), names);
}

TEST(ResultSchema, ModesAreTheRunsModes) {
  std::vector<std::string> names;
  for (RunMode m : kRunModes) names.emplace_back(run_mode_name(m));
  std::ifstream in(suites_dir() + "/schema/result.schema.json");
  EXPECT_EQ(json::parse(in)["properties"]["mode"]["enum"].get<std::vector<std::string>>(), names);
}

// The sync policy's spans: its reductions (the communicator's marks) and its updates; a wait or
// a progress pass is not a span (GradSync::traced).
TEST(ResultSchema, SpanCategoriesAreThePassesTheCopyTheStepAndTheLoader) {
  std::vector<std::string> names;
  for (Pass p : kLayerAndLossPasses) names.emplace_back(pass_name(p));
  // A swap's copies (its waits are no spans: SwapPasses::traced).
  names.emplace_back(pass_name(Pass::kSwapOut));
  names.emplace_back(pass_name(Pass::kSwapIn));
  names.emplace_back(sync_pass_name(SyncPass::kAllReduce));
  names.emplace_back(sync_pass_name(SyncPass::kUpdate));
  names.emplace_back(kCopyCategory);
  names.emplace_back(kStepCategory);
  names.emplace_back(kLoaderCategory);
  EXPECT_EQ(exported("span_category").get<std::vector<std::string>>(), names);
}

// check_ops.schema.json's op and pass names are the checker's own.
TEST(CheckOpsSchema, OpsAndPassesAreTheCheckersNames) {
  std::ifstream in(suites_dir() + "/schema/check_ops.schema.json");
  const json row = json::parse(in)["$defs"]["row"]["properties"];
  std::vector<std::string> ops, passes;
  for (OpKind k : kOpKinds) ops.emplace_back(op_kind_name(k));
  for (CheckPass p : kCheckPasses) passes.emplace_back(check_pass_name(p));
  EXPECT_EQ(row["op"]["enum"].get<std::vector<std::string>>(), ops);
  EXPECT_EQ(row["pass"]["enum"].get<std::vector<std::string>>(), passes);
}

// maxbatch.schema.json's memory plans are the planner's own.
TEST(MaxBatchSchema, MemoryPlansAreThePlannersNames) {
  std::ifstream in(suites_dir() + "/schema/maxbatch.schema.json");
  const json config = json::parse(in)["properties"]["config"]["properties"];
  std::vector<std::string> plans;
  for (MemoryPlanKind k : kMemoryPlanKinds) plans.emplace_back(memory_plan_name(k));
  EXPECT_EQ(config["memory_plan"]["enum"].get<std::vector<std::string>>(), plans);
}

json ok_record(const std::string& id, int ranks, double throughput, const std::string& overlap) {
  return {{"status", "ok"},
          {"point", {{"id", id}}},
          {"config", {{"model", "resnet18"}, {"ranks", ranks}, {"overlap", overlap}}},
          {"metrics", {{"throughput_img_s", throughput}}}};
}

TEST(ScalingEfficiency, AgainstTheOneRankPointThatDiffersOnlyInRanks) {
  std::vector<json> recorded = {ok_record("a", 1, 100, "none"), ok_record("b", 1, 80, "backward")};
  json two = ok_record("c", 2, 150, "backward");
  add_scaling_efficiency(two, recorded);
  EXPECT_DOUBLE_EQ(two["metrics"]["scaling_efficiency"].get<double>(), 150.0 / (2 * 80));
  EXPECT_EQ(two["metrics"]["scaling_baseline"], "b");

  json forward = ok_record("d", 2, 150, "forward");  // no 1-rank forward point
  add_scaling_efficiency(forward, recorded);
  EXPECT_FALSE(forward["metrics"].contains("scaling_efficiency"));

  recorded[0]["status"] = "failed";
  json none = ok_record("e", 4, 300, "none");
  add_scaling_efficiency(none, recorded);
  EXPECT_FALSE(none["metrics"].contains("scaling_efficiency"));
}

}  // namespace
}  // namespace dlb
