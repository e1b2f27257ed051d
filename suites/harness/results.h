// results.jsonl: one JSON line per point, appended, flushed and fsync'd, so a crash of the
// harness or of a later point never loses a line already written.
#pragma once
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace dlb {

void append_jsonl(const std::string& path, const nlohmann::json& record);
// Every well-formed line; a torn last line (a crash mid-write) is skipped with a warning.
std::vector<nlohmann::json> read_jsonl(const std::string& path);
// Ids of the points recorded with status "ok".
std::set<std::string> ok_point_ids(const std::string& path);

// Scaling efficiency, defined here only (docs/metrics.md): throughput(N) / (N x throughput(1)),
// against the ok 1-rank record among `recorded` whose config differs from `record`'s only in
// ranks. Sets metrics.scaling_efficiency and metrics.scaling_baseline (that record's point id) in
// an ok record when such a record exists; the reports read these keys and never recompute them.
void add_scaling_efficiency(nlohmann::json& record, const std::vector<nlohmann::json>& recorded);

}  // namespace dlb
