// `dlbench simulate`: what-if scaling (docs/simulation.md). Each calibration (from a results
// folder's measured one-rank points, or a file) is simulated on a network preset at each rank
// count, overlap strategy and bucket size; each point becomes a result record with mode
// "simulated" (appended to the results file), a simulated Chrome trace of rank 0, and its
// scaling-loss breakdown.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/overlap/strategy.h"
#include "runtime/sim/calibration.h"
#include "runtime/sim/network.h"

namespace dlb {

struct SimulateCommandOptions {
  std::string from;         // a results folder: its measured one-rank points calibrate
  std::string calibration;  // or one calibration file
  // Or the roofline on a device (suites/devices/<name>.json) for --model, --batch, --image-size
  // (default 224) and --precision (default bf16).
  std::string roofline;
  std::optional<int64_t> image_size;
  std::string precision = "bf16";
  // Only the calibrations of this model and batch (refused when there is none).
  std::string model;
  std::optional<int64_t> batch;
  std::string network = "dgx-h100";
  std::vector<int64_t> ranks = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  std::vector<OverlapStrategy> overlaps = {OverlapStrategy::kNone, OverlapStrategy::kBackward,
                                           OverlapStrategy::kForward};
  std::vector<double> bucket_mb = {25.0};
  // sync, stale:K (bounded staleness), async (a parameter server on rank 0) or independent
  // (runtime/overlap/strategy.h); the last three with the strategy none.
  SyncMode sync;
  int64_t steps = 50, warmup = 2;
  // Each rank's step-to-step spread: "measured" (the calibration's), "none", or "cv:X" (a normal
  // spread with coefficient of variation X, where the calibration has none: a roofline's).
  std::string jitter = "measured";
  std::string straggler;      // "RANK:FACTOR"
  double compute_factor = 1;  // every rank's compute this many times slower (shared cores)
  uint64_t seed = 0;
  std::string out;     // the folder for results.jsonl and traces/ (default: from, or ".")
  bool traces = true;  // rank 0's simulated trace of each point
};

int simulate_command(const SimulateCommandOptions& options);

// A suite's `simulate` block, checked before the sweep runs a point: its networks load and its
// jitter parses. InvalidArgument naming `where`.
void check_simulate_block(const nlohmann::json& block, const std::string& where);

// A suite's `simulate` block (suites/schema/suite.schema.json) over the sweep's results in `out`:
// simulate_command once per network, from the suite's measured one-rank points, or from the
// roofline of the network's device (its `device`) where the block's `calibration` says
// `roofline`, or says `auto` (the default) and the points ran on another device. A failure is
// printed, not thrown: returns false then.
bool simulate_suite_block(const nlohmann::json& block, const std::string& out);

// A measured multi-rank point simulated from its one-rank baseline (validate-sim's): `base`
// (read from `base_where`, for messages) calibrates, its calibration written under
// out/calibration; the network is out/../network.json, as the simulated record's command names
// it; the point's ranks, strategy and bucket size, 50 timed steps, each rank `compute_factor`
// times slower. The simulated record, appended to out/results.jsonl.
nlohmann::json simulate_measured_point(const nlohmann::json& point, const nlohmann::json& base,
                                       const std::string& base_where, const Network& network,
                                       double compute_factor, const std::string& out);

// `c` simulated on `network` at every point of `options` (its strategies, bucket sizes and rank
// counts), each record appended to `out`/results.jsonl and its trace written under `out`/traces;
// the records, in order. Its speeds are refused (InvalidArgument) before anything is written.
std::vector<nlohmann::json> simulate_calibration(const Calibration& c, const Network& network,
                                                 const SimulateCommandOptions& options,
                                                 const std::string& out);

}  // namespace dlb
