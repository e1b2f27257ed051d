// The point file: what the harness writes for each point of a sweep, and what
// `dlbench worker --point=FILE` reads back. Read strictly (runtime/io/json_fields.h): a file that
// is not a regular file, not JSON, not an object, or holds a key of the wrong type is refused
// with one line naming the file and the key, before anything runs.
#pragma once
#include <string>
#include <string_view>

#include "suites/harness/core/run_options.h"

namespace dlb {

// The run a point file describes: its config through the option table, where the worker writes
// its record, trace, profile and MLPerf log, and where a point of data folder or shards reads
// its images (`data_path`).
RunOptions parse_point(std::string_view text, const std::string& where);
RunOptions read_point_file(const std::string& path);

}  // namespace dlb
