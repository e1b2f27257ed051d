// The scaling-loss breakdown of a measured multi-rank point (docs/metrics.md, "Scaling loss"),
// from the Chrome traces of its ranks and of its one-rank baseline. Per traced step and rank:
//   busy:      the compute lane's spans (their union) inside the step's span;
//   idle:      the rest of the step's span;
//   exposed:   the idle time while one of the rank's all-reduces runs;
//   lag:       how much later the last rank launched a bucket's all-reduce than this rank did
//              (the ranks' clocks aligned by their traces' origin_unix_us), the largest over
//              the step's buckets. A span's start is where its rank saw the reduction begin:
//              on a GPU that is the device's start, after the launch, and the lag reads near 0.
// Then, as means over ranks and traced steps: compute_slowdown = busy - the baseline's busy;
// waiting_for_slowest = min(exposed, lag); exposed_comm = exposed - waiting_for_slowest;
// rest = idle - exposed - the baseline's idle. The parts add up to the mean step span less the
// baseline's.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dlb {

// metrics.scaling_loss from the ranks' traces (`ranks`, rank 0 first) and the baseline's;
// `where` names them in messages. InvalidArgument when a trace has no step spans or the ranks'
// traced steps differ.
nlohmann::json measured_scaling_loss(const std::vector<nlohmann::json>& ranks,
                                     const nlohmann::json& baseline, const std::string& where);

// Sets metrics.scaling_loss in an ok measured record of several ranks whose scaling baseline is
// among `recorded` and whose traces (and the baseline's) can be read, relative to `dir` where
// they moved with it; leaves the record alone otherwise.
void add_measured_scaling_loss(nlohmann::json& record, const std::vector<nlohmann::json>& recorded,
                               const std::string& dir);

}  // namespace dlb
