// What the simulator knows of one rank's step (docs/simulation.md): each layer pass's time, the
// loss's, the optimizer's, and how much the step's time varies, for one model, batch, image size,
// precision and device. Made from a measured one-rank run's per-layer profile (dlbench simulate
// writes one per such run, as calibration/*.json beside its results).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/nn/graph.h"
#include "runtime/overlap/bucket_plan.h"
#include "runtime/sim/network.h"
#include "runtime/sim/simulator.h"
#include "runtime/train/replay.h"

namespace dlb {

struct LayerTimes {
  std::string name;
  // Milliseconds; 0 for a pass the layer does not run (a view's, a fused ReLU's).
  double forward_ms = 0, backward_data_ms = 0, backward_weights_ms = 0, backward_ms = 0,
         recompute_ms = 0;
};

struct Calibration {
  std::string model, precision, backend, device;
  int64_t batch = 0, image_size = 0, num_classes = 0;
  // Whether the backend ran batch norm and ReLU as one pass, and a convolution and its ReLU (the
  // graph is declared so; a file without the second is from before it existed: false).
  bool fused_relus = false;
  bool fused_conv_relus = false;
  std::string memory_plan = "naive", recompute = "none";
  // Where the figures come from: {"method": "profile", "record": ..., "profile": ...}.
  nlohmann::json source;
  // The measured step (the mean over its timed steps), and that over the profile's sum of its
  // passes: every pass's time is scaled by it, so that one simulated rank takes the measured step
  // (the profile's spans miss the time between passes).
  double step_ms = 0, scale = 1;
  double loss_ms = 0, optimizer_ms = 0;  // per step
  std::vector<LayerTimes> layers;
  // Each timed step's time over their mean: the rank's speed from step to step.
  std::vector<double> jitter;
};

// A calibration file: InvalidArgument naming `where` and the field when one is missing or out of
// range.
Calibration parse_calibration(const nlohmann::json& j, const std::string& where);
nlohmann::json calibration_json(const Calibration& c);

// What `graph` (declared for the calibration's model and batch) cannot take from `c`: a layer
// the calibration does not have, or one it has that the graph does not. Empty when it fits.
std::string calibration_mismatch(const Calibration& c, const Graph& graph);

// The time of each pass of a step of `graph` with `plan`'s buckets over `ranks` ranks: a layer
// pass's from the calibration, an update's as its bucket's share of the optimizer's time, an
// all-reduce's the network's fastest algorithm for its bytes (reduction_bytes).
// The bytes an all-reduce of bucket `bucket` moves (-1: the whole gradient buffer; kMeeting:
// independent ranks' token).
double reduction_bytes(const Graph& graph, const BucketPlan& plan, int bucket);

PassCost calibrated_cost(const Calibration& c, const Graph& graph, const BucketPlan& plan,
                         const Network& network, int64_t ranks);

// How each all-reduce of a step of `graph` with `plan`'s buckets over `ranks` ranks shares the
// cores that compute: the network's at its bytes (core_sharing); none where the network's
// reductions take nothing from compute.
SharingOf reduction_sharing(const Graph& graph, const BucketPlan& plan, const Network& network,
                            int64_t ranks);

// Asynchronous SGD's parameter server (runtime/overlap/param_server.h) for `graph`: applying a
// push is the calibrated optimizer's time (the same SGD over the same bytes, in the same thread
// pool), and copying the weights into a reply 2/5 of it (two streams of the bytes against
// SGD's five); a push's
// gradients or a reply's weights (fp32) cross rank 0's node link to a rank of its node, or one NIC
// to a rank of another, in latency + bytes / bandwidth. Unsupported for a calibration on another
// backend: its server would run on a host CPU the calibration does not time.
ServerCosts server_costs(const Calibration& c, const Graph& graph, const Network& network);

}  // namespace dlb
