// A calibration without a profile (docs/simulation.md, "Roofline calibration"): each pass's time
// is the larger of its FLOPs over the device's peak FLOP/s (for the run's precision) and its bytes
// over the device's memory bandwidth, divided by one efficiency factor. The factor is fitted so
// that one model's step on the device takes what a measured or published single-device throughput
// says; the same factor serves every model on that device.
//
// A pass's FLOPs: the layer's forward FLOPs for its forward (and recompute) pass, and for each of
// its backward-data and backward-weights passes (a matrix product's backward is two products of
// the forward's size; a pointwise layer's backward is about its forward); twice them for a fused
// backward (batch norm). Its bytes: what it reads and writes once each, in their storage types:
// forward, the inputs, the output and the parameters; backward-data, the output's gradient, the
// inputs' gradients and the parameters; backward-weights, the output's gradient, the inputs and
// the parameters' gradients; fused backward, all of them. Only the passes the graph's backward
// schedule runs have a time (none computes the input image's gradient).
#pragma once
#include <string>

#include "runtime/core/dtype.h"
#include "runtime/nn/graph.h"
#include "runtime/sim/calibration.h"

namespace dlb {

struct DevicePeaks {
  double flops_per_s = 0;  // dense, for the run's precision
  double bytes_per_s = 0;  // memory bandwidth
};

// Per layer, the roofline times (milliseconds) at efficiency 1; the loss's and the optimizer's in
// `loss_ms` and `optimizer_ms` (softmax cross-entropy over the logits; SGD with momentum over
// every parameter: the weights, their gradients and the momentum read, the weights and momentum
// written).
struct RooflineTimes {
  std::vector<LayerTimes> layers;
  double loss_ms = 0, optimizer_ms = 0;
  double step_ms() const;  // every layer's forward and backward, the loss and the optimizer
};
RooflineTimes roofline_times(const Graph& graph, const DevicePeaks& peaks);

}  // namespace dlb
