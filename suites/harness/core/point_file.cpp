#include "suites/harness/core/point_file.h"

#include <fmt/format.h>

#include <limits>

#include "runtime/core/error.h"
#include "runtime/io/json_fields.h"
#include "runtime/io/json_text.h"
#include "runtime/io/text_file.h"
#include "suites/harness/core/option_table.h"

namespace dlb {

RunOptions parse_point(std::string_view text, const std::string& where) {
  const nlohmann::json point = parse_json(text, where);
  const JsonFields f(point, where);
  RunOptions o;
  try {
    o = options_from_json(f.object("config").json());
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{}: config: {}", where, e.what()));
  }
  o.json_path = f.string("record");
  if (o.json_path.empty()) f.fail("record", "the path of the record to write");
  o.trace_steps = f.integer_or("trace_steps", 0, 0, std::numeric_limits<int64_t>::max());
  o.trace_path = f.string_or("trace", "");
  o.profile_path = f.string_or("profile", "");
  o.mllog_path = f.string_or("mllog", "");
  if (const std::string images = f.string_or("data_path", ""); !images.empty()) {
    o.data_path = images;  // the suite's images (suites/harness/sweep/suite_images.h)
  }
  o.config_file = f.string_or("suite_file", "");
  // The harness writes "" for no fault; any other name is the option table's.
  if (const std::string fault = f.string_or("fault", ""); !fault.empty()) {
    try {
      apply_option(o, *find_option("inject_fault"), fault, OptionOrigin::kConfig);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(fmt::format("{}: key 'fault': {}", where, e.what()));
    }
  }
  return o;
}

RunOptions read_point_file(const std::string& path) {
  return parse_point(read_text_file(path, "point file"), path);
}

}  // namespace dlb
