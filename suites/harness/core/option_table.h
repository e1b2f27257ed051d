// The options of one training run, each defined once: its key (in suite files and in the
// record's config), its flag (the key with dashes: --bucket-mb), type, default, allowed values,
// range and help. The command line, the suite and point parser, the record's config and the
// test that checks the JSON schemas and docs/suites.md against them all read this table.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "suites/harness/core/run_options.h"

namespace dlb {

// kUnsigned: an integer of 0 to 2^64 - 1 (a seed); kInteger: a signed 64-bit integer, each
// option's range bounding it to what its users hold it in. kNumber: a finite double; kFloat: a
// number the runtime keeps as a 32-bit float, refused unless the float it becomes is finite,
// normal or zero (1e-46 would become 0, 1e39 infinity), and in range as a float. kBoolean:
// true or false in a suite; on the command line the bare flag is true (--cuda-graph), or
// --flag=true|false.
enum class OptionType { kInteger, kUnsigned, kNumber, kFloat, kString, kBytes, kPath, kBoolean };
// kConfig: a suite key, a flag and a key of the record's config. kCommandLine: a flag of
// `dlbench run` only (files to read or write, test hooks).
enum class OptionScope { kConfig, kCommandLine };

// What a kPath option names: a file the run reads, or one it writes (checked before any work by
// runtime/io/output_file.h's rules, and written whole).
// kOutputStream: a log written as the run goes (the MLPerf log), never renamed over its target, so
// a FIFO or a character device (/dev/stdout) may take it; a directory may not.
enum class PathRole { kInput, kOutputFile, kOutputDir, kOutputStream };

struct OptionRange {
  std::optional<double> min, max;
  bool min_exclusive = false, max_exclusive = false;
};

struct Option {
  std::string key;
  OptionType type;
  OptionScope scope;
  std::string help;
  std::vector<std::string> values;  // the allowed values of a kString option; empty: any
  OptionRange range;
  // Sets the option from a value that has passed check_option_value.
  std::function<void(RunOptions&, const nlohmann::json&)> set;
  // The option's value in `o` as the record writes it; null when unset.
  std::function<nlohmann::json(const RunOptions&)> get;
  bool hidden = false;                    // test hooks: not in --help
  PathRole path_role = PathRole::kInput;  // kPath only

  std::string flag() const;        // "--bucket-mb"
  std::string metavar() const;     // "cpu|cuda", "INT", "NUMBER", "SIZE", "PATH", "TEXT", "BOOL"
  std::string range_text() const;  // ">= 1", "positive", "in (0, 1]"; empty when unbounded
  bool in_range(double v) const;
};

const std::vector<Option>& run_option_table();
// nullptr when no option has this key.
const Option* find_option(std::string_view key);

// How a value names its option in messages: "--batch" on the command line, "batch" in a suite.
enum class OptionOrigin { kCommandLine, kConfig };

// Checks `value` against the option's type, allowed values and range, then sets it in `o`.
// Throws InvalidArgument naming the option as `origin` spells it, the expectation and the value.
void apply_option(RunOptions& o, const Option& option, const nlohmann::json& value,
                  OptionOrigin origin);
// InvalidArgument naming the flag when an output path of `o` (--json, --trace, --save, ...) cannot
// take the file the run writes there: checked before any work, so that nothing runs for a record
// that could not be written, and no device or FIFO is replaced by a regular file.
void check_output_paths(const RunOptions& o);
// The checks apply_option makes, without setting anything.
void check_option_value(const Option& option, const nlohmann::json& value, OptionOrigin origin);
// Command-line text as the JSON value a suite file would hold (an integer, a number, a string or
// a boolean: "true" or "false", and "" for a bare flag, which is true).
// Throws InvalidArgument when the text is not of the option's type.
nlohmann::json value_from_text(const Option& option, const std::string& text);

// A point's config as suite files write it ({"model": "resnet18", "batch": 16, ...}) -> typed
// options. Throws InvalidArgument naming the key.
RunOptions options_from_json(const nlohmann::json& config);
// Every kConfig option's value in `o`, keyed as suite files key them: the record's config.
nlohmann::json config_json(const RunOptions& o);
// The `dlbench run` command that runs `o` again: every config option that differs from its
// default, as its flag, each a shell word, and the data's path where one was given; under `mpirun
// -np N` for several ranks (on one CPU host, a sweep also sets OMP_NUM_THREADS to the cores over
// the ranks). Records carry it, and reports show it.
std::string reproduce_command(const RunOptions& o);

// `text` as one shell word: as it is when every character is safe, else single-quoted.
std::string shell_word(const std::string& text);

}  // namespace dlb
