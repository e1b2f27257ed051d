// The option table is the one definition of a run's options: the command line, the suite parser
// and the record's config are built from it, and the JSON schemas and docs/suites.md must agree
// with it, key for key, in type, allowed values, range and description.
#include "suites/harness/core/option_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include "runtime/core/error.h"
#include "suites/harness/core/flag_hint.h"
#include "suites/harness/core/source_dir.h"
#include "suites/harness/core/suite.h"

namespace dlb {
namespace {
using json = nlohmann::json;

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  return json::parse(in);
}

std::vector<const Option*> config_options() {
  std::vector<const Option*> out;
  for (const Option& o : run_option_table()) {
    if (o.scope == OptionScope::kConfig) out.push_back(&o);
  }
  return out;
}

std::set<std::string> config_keys() {
  std::set<std::string> keys;
  for (const Option* o : config_options()) keys.insert(o->key);
  return keys;
}

std::string schema_type(const Option& o) {
  switch (o.type) {
    case OptionType::kInteger:
    case OptionType::kUnsigned:
      return "integer";
    case OptionType::kNumber:
    case OptionType::kFloat:
      return "number";
    case OptionType::kBoolean:
      return "boolean";
    default:
      return "string";
  }
}

// The suite schema's definition of a key, as the table defines it.
json expected_suite_key(const Option& o) {
  json k = {{"type", schema_type(o)}};
  if (!o.values.empty()) k["enum"] = o.values;
  if (o.range.min) k[o.range.min_exclusive ? "exclusiveMinimum" : "minimum"] = *o.range.min;
  if (o.range.max) k[o.range.max_exclusive ? "exclusiveMaximum" : "maximum"] = *o.range.max;
  // The default, where the run has one of its own (an unset key, null, means "the model's" or
  // "none"): what a peer takes for a key a point does not set.
  if (const json d = o.get(RunOptions{}); !d.is_null()) k["default"] = d;
  k["description"] = o.help;
  return k;
}

std::set<std::string> keys_of(const json& object) {
  std::set<std::string> keys;
  for (const auto& [k, _] : object.items()) keys.insert(k);
  return keys;
}

TEST(OptionTable, KeysAreUniqueAndFlagsAreTheKeysWithDashes) {
  std::set<std::string> seen;
  for (const Option& o : run_option_table()) {
    EXPECT_TRUE(seen.insert(o.key).second) << o.key;
    EXPECT_EQ(o.flag().substr(0, 2), "--");
    EXPECT_EQ(o.flag().find('_'), std::string::npos) << o.flag();
    EXPECT_FALSE(o.help.empty()) << o.key;
  }
  EXPECT_EQ(find_option("bucket_mb")->flag(), "--bucket-mb");
  EXPECT_EQ(find_option("no_such_key"), nullptr);
}

TEST(OptionTable, SuiteSchemaDefinesEachConfigKeyAsTheTableDoes) {
  const json schema = read_json(suites_dir() + "/schema/suite.schema.json");
  const json& defs = schema["$defs"];
  EXPECT_EQ(keys_of(defs["key"]), config_keys());
  EXPECT_EQ(keys_of(defs["config"]["properties"]), config_keys());
  EXPECT_EQ(keys_of(defs["sweep"]["properties"]), config_keys());
  for (const Option* o : config_options()) {
    EXPECT_EQ(defs["key"].value(o->key, json()), expected_suite_key(*o))
        << "suite.schema.json $defs/key/" << o->key << " should be "
        << expected_suite_key(*o).dump();
  }
}

TEST(OptionTable, ResultSchemaTypesEveryKeyOfTheRecordsConfig) {
  const json schema = read_json(suites_dir() + "/schema/result.schema.json");
  const json& props = schema["properties"]["config"]["properties"];
  EXPECT_EQ(keys_of(props), config_keys());
  const json recorded = config_json(RunOptions{});
  for (const Option* o : config_options()) {
    const json& p = props.value(o->key, json::object());
    // A key whose default is unset is recorded as null, unless the run resolves it (batch).
    const json type = schema_type(*o);
    if (recorded[o->key].is_null()) {
      EXPECT_TRUE(p.value("type", json()) == type ||
                  p.value("type", json()) == json::array({type, "null"}))
          << "result.schema.json config/" << o->key << ": " << p.dump();
    } else {
      EXPECT_EQ(p.value("type", json()), type) << "result.schema.json config/" << o->key;
    }
    const json allowed = p.value("enum", json::array());
    for (const std::string& v : o->values) {
      EXPECT_TRUE(std::find(allowed.begin(), allowed.end(), v) != allowed.end())
          << "result.schema.json config/" << o->key << " lacks " << v;
    }
  }
}

// docs/suites.md's sentence "Config keys: `model`, `batch` (per rank), ..." names every config
// key, and nothing else outside its parentheses.
TEST(OptionTable, SuitesDocListsEveryConfigKey) {
  std::ifstream in(source_dir() + "/docs/suites.md");
  std::stringstream text;
  text << in.rdbuf();
  const std::string readme = text.str();
  const size_t at = readme.find("Config keys:");
  ASSERT_NE(at, std::string::npos);
  // The sentence ends at a full stop followed by a space or a newline.
  size_t end = at;
  while (end + 1 < readme.size() && !(readme[end] == '.' && std::isspace(readme[end + 1]))) ++end;
  std::set<std::string> listed;
  int depth = 0;  // inside parentheses: values and notes, not keys
  for (size_t i = at; i < end; ++i) {
    if (readme[i] == '(') ++depth;
    if (readme[i] == ')') --depth;
    if (readme[i] != '`' || depth > 0) continue;
    const size_t close = readme.find('`', i + 1);
    ASSERT_NE(close, std::string::npos);
    listed.insert(readme.substr(i + 1, close - i - 1));
    i = close;
  }
  EXPECT_EQ(listed, config_keys());
}

// Every default, written to a record and read back as a suite config, gives the same options.
TEST(OptionTable, RecordedConfigReadsBackAsTheSameConfig) {
  RunOptions o;
  o.batch = 8;
  o.memory_budget = size_t{3} << 30;
  o.dropout = 0.25f;
  o.sgd.lr = 0.1f;
  json recorded = config_json(o);
  for (auto it = recorded.begin(); it != recorded.end();) {
    it = it->is_null() ? recorded.erase(it) : std::next(it);
  }
  EXPECT_EQ(recorded["memory_budget"], "3GiB");
  EXPECT_EQ(recorded["lr"], 0.1);
  EXPECT_EQ(config_json(options_from_json(recorded)), config_json(o));
}

// A record's command runs the point again: its flags, read back as the command line reads them,
// give the same config.
TEST(OptionTable, ReproduceCommandReadsBackAsTheSameConfig) {
  EXPECT_EQ(reproduce_command(RunOptions{}), "dlbench run");
  RunOptions o = options_from_json({{"model", "resnet50"},
                                    {"batch", 64},
                                    {"ranks", 4},
                                    {"overlap", "backward"},
                                    {"precision", "bf16"},
                                    {"memory_budget", "3GiB"},
                                    {"lr", 0.05},
                                    {"cuda_graph", true},
                                    {"dropout", 0.25}});
  const std::string cmd = reproduce_command(o);
  EXPECT_EQ(cmd.rfind("mpirun -np 4 dlbench run --model=resnet50 ", 0), 0u) << cmd;
  EXPECT_NE(cmd.find(" --cuda-graph"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find(" --memory-budget=3GiB"), std::string::npos) << cmd;
  RunOptions back;
  std::string word;
  const std::string flags =
      cmd.substr(cmd.find("dlbench run ") + std::string("dlbench run ").size());
  for (std::istringstream in(flags); in >> word;) {
    const size_t eq = word.find('=');
    std::string key = word.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    std::replace(key.begin(), key.end(), '-', '_');
    const Option* option = find_option(key);
    ASSERT_NE(option, nullptr) << word;
    apply_option(back, *option,
                 value_from_text(*option, eq == std::string::npos ? "" : word.substr(eq + 1)),
                 OptionOrigin::kCommandLine);
  }
  EXPECT_EQ(config_json(back), config_json(o));
}

TEST(OptionTable, ValuesAreCheckedAgainstTypeValuesAndRange) {
  const auto message = [](const json& config) -> std::string {
    try {
      options_from_json(config);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(message({{"batch", 0}}), "batch must be in [1, 2147483647] (got 0)");
  EXPECT_EQ(message({{"lr", 0}}), "lr must be positive (got 0)");
  EXPECT_EQ(message({{"lr", -0.5}}), "lr must be positive (got -0.5)");
  EXPECT_EQ(message({{"dropout", 1}}), "dropout must be in [0, 1) (got 1)");
  EXPECT_EQ(message({{"target_accuracy", 0}}), "target_accuracy must be in (0, 1] (got 0)");
  EXPECT_EQ(message({{"batch", "16"}}), "batch: expected an integer, got \"16\"");
  EXPECT_EQ(message({{"batch", 1.5}}), "batch: expected an integer, got 1.5");
  EXPECT_EQ(message({{"ranks", 9223372036854775808ull}}),
            "ranks: 9223372036854775808 is too large");
  EXPECT_EQ(message({{"precision", "fp64"}}),
            "precision: unknown precision 'fp64' (expected fp32, tf32, fp16, bf16)");
  EXPECT_EQ(message({{"trace", "t.json"}}), "unknown config key 'trace'");
  EXPECT_EQ(message(json::array()), "a config must be an object, got []");
  EXPECT_EQ(message({{"seed", 18446744073709551615ull}}), "");
}

TEST(OptionTable, CommandLineTextBecomesTheValueASuiteWouldHold) {
  EXPECT_EQ(value_from_text(*find_option("batch"), "32"), json(32));
  EXPECT_EQ(value_from_text(*find_option("lr"), "1e-3"), json(1e-3));
  EXPECT_EQ(value_from_text(*find_option("backend"), "cuda"), json("cuda"));
  EXPECT_THROW(value_from_text(*find_option("batch"), "32x"), InvalidArgument);
  EXPECT_THROW(value_from_text(*find_option("batch"), "99999999999999999999"), InvalidArgument);
  EXPECT_THROW(value_from_text(*find_option("lr"), ""), InvalidArgument);
  EXPECT_THROW(value_from_text(*find_option("lr"), "0.1.2"), InvalidArgument);
  EXPECT_EQ(find_option("backend")->metavar(), "cpu|cuda");
}

TEST(FlagHint, EditsCountSwapsAsOne) {
  EXPECT_EQ(edit_distance("modle", "model"), 1);
  EXPECT_EQ(edit_distance("stpes", "steps"), 1);
  EXPECT_EQ(edit_distance("", "out"), 3);
  EXPECT_EQ(edit_distance("batch", "batch"), 0);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3);
}

TEST(FlagHint, ANearFlagIsNamedAndAFarOrKnownOneIsNot) {
  const std::vector<std::string> known = {"model", "steps", "out", "overlap", "batch"};
  EXPECT_EQ(nearest_flag("--modle=resnet18", known), "model");
  EXPECT_EQ(nearest_flag("--stpes", known), "steps");
  EXPECT_EQ(nearest_flag("--outt=x", known), "out");
  EXPECT_EQ(nearest_flag("--overlpa", known), "overlap");
  EXPECT_EQ(nearest_flag("--model=x", known), std::nullopt);  // known
  EXPECT_EQ(nearest_flag("--xyz", known), std::nullopt);      // near none
  EXPECT_EQ(nearest_flag("--o", known), std::nullopt);        // 2 edits from "out": most of it
  EXPECT_EQ(nearest_flag("-m", known), std::nullopt);         // not a long flag
  EXPECT_EQ(nearest_flag("model", known), std::nullopt);
  EXPECT_EQ(nearest_flag("--", known), std::nullopt);
  EXPECT_EQ(nearest_flag("--=3", known), std::nullopt);
  // A bare word against command names.
  EXPECT_EQ(nearest_name("rnu", {"run", "list", "bench"}), "run");
  EXPECT_EQ(nearest_name("run", {"run", "list"}), std::nullopt);
  EXPECT_EQ(nearest_name("zzzz", {"run", "list"}), std::nullopt);
}

}  // namespace
}  // namespace dlb
