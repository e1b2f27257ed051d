// `dlbench validate-sim`: the simulator against real runs on this machine (docs/simulation.md,
// "In brief"). It measures how much slower a rank computes beside others with no communication
// (co-runs: ranks in step under --sync=independent against one alone, in rounds before and after
// the points; the compute factor of each rank count), this host's averaging all-reduce at each
// rank count before and after the points (`bench allreduce --average`; each size's faster
// time), runs a small scaling suite (one rank and each rank count, per strategy, with
// repetitions), simulates every multi-rank point from its one-rank baseline's calibration on the
// measured network, and records each point's prediction error beside its bound: three standard
// deviations of the prediction's error, from the multi-rank points' pooled repetitions CV, the
// calibration's and the compute factor's spread over its rounds.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/overlap/strategy.h"
#include "runtime/sim/network.h"
#include "suites/harness/core/sweep_options.h"

namespace dlb {

// What validate-sim is made of, handed over by main.cpp so that it includes no other command: a
// suite's sweep (sweep_command), and a measured point simulated from its one-rank baseline's
// calibration (simulate_measured_point: the point, the baseline's record and where it was read,
// the network, the compute factor and the folder), which returns the simulated record.
struct ValidateSimParts {
  std::function<int(const SweepOptions&)> sweep;
  std::function<nlohmann::json(const nlohmann::json& point, const nlohmann::json& base,
                               const std::string& base_where, const Network& network,
                               double compute_factor, const std::string& out)>
      simulate;
};

struct ValidateSimOptions {
  std::string out = "out/validate-sim";
  std::string model = "resnet18";
  int64_t batch = 8, image_size = 32;
  std::vector<int64_t> ranks = {2, 4};
  std::vector<OverlapStrategy> overlaps = {OverlapStrategy::kNone, OverlapStrategy::kBackward,
                                           OverlapStrategy::kForward};
  int64_t steps = 20, warmup = 2, repetitions = 3;
  ValidateSimParts parts;
};

// Exit 0 when every point's error is within its bound; 1 when one is not (validation.json says
// which), or when a measured point failed; 3 (inconclusive) when other processes or the
// hypervisor took CPU time from a judged point, its baseline or a co-run, when the steps of a
// run alone on the host (a baseline, a co-run's run alone) varied by more than the noise
// threshold (lone_run_reasons), when a fixed memory stream timed before and after the runs varied
// by more than that threshold too, or moved that much between the two (host_steadiness.h), or
// when a point's bound is over 50%, whatever the errors.
int validate_sim_command(const ValidateSimOptions& options);

}  // namespace dlb
