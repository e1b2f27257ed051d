// results.jsonl: one JSON line per point, appended, flushed and fsync'd, so a crash of the
// harness or of a later point never loses a line already written.
#pragma once
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace dlb {

// Appends one record (refused, InvalidArgument, if it holds a number that is not finite: JSON
// would write it as null, and every reader would then refuse the folder). Only to a regular file.
void append_jsonl(const std::string& path, const nlohmann::json& record);
// The JSON pointer of the first number in `j` that is not finite ("/metrics/throughput_img_s"),
// or "" when every one is.
std::string non_finite_at(const nlohmann::json& j);
// Every record of a results.jsonl, read as the reports read it: each line must be a record that
// suites/schema/result.schema.json accepts, with the keys the harness reads back (point index
// and id, suite_config, and an ok record's throughput). Otherwise InvalidArgument naming the
// file, the line and what is wrong. A last line without its newline (a torn write) is refused
// too: `--resume` moves it aside first (set_aside_torn_tail).
std::vector<nlohmann::json> parse_results(std::string_view text, const std::string& path);
// One record, as parse_results checks each line, and every number in it finite; `where` names it
// in the InvalidArgument.
void check_record(const nlohmann::json& record, const std::string& where);
// InvalidArgument naming `where` unless `environment` is what a record's environment must be
// (result.schema.json): what simulate copies from a calibration into each record it writes.
void check_record_environment(const nlohmann::json& environment, const std::string& where);
std::vector<nlohmann::json> read_results(const std::string& path);
// When `text` (the whole of `path`, as read) does not end in a newline, a crash cut its last
// record short: moves the bytes after the last newline to "<path>.torn-N" (the first N free,
// created exclusively), then cuts the file back to its last whole line, and returns the torn
// file's path; "" when there is nothing torn. IoError when the file no longer has text's size.
std::string set_aside_torn_tail(const std::string& path, std::string_view text);
// Ids of the points recorded with status "ok" among `records`.
std::set<std::string> ok_point_ids(const std::vector<nlohmann::json>& records);

// Scaling efficiency, defined here only (docs/metrics.md): throughput(N) / (N x throughput(1)),
// against the ok 1-rank record among `recorded` whose config differs from `record`'s only in
// ranks. Sets metrics.scaling_efficiency and metrics.scaling_baseline (that record's point id) in
// an ok record when such a record exists; the reports read these keys and never recompute them.
void add_scaling_efficiency(nlohmann::json& record, const std::vector<nlohmann::json>& recorded);

}  // namespace dlb
