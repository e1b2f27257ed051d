// The training step as data (docs/architecture.md, "The step"): a list of passes, each
// naming the tensors it reads, writes and saves for later passes. The graph emits forward and
// backward; the trainer adds the loss; a sync policy adds all-reduces and updates; an executor
// runs the list. A memory planner, recomputation or swapping is a transformation of this list.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/dtype.h"
#include "runtime/core/shape.h"

namespace dlb {

enum class Pass {
  kForward,
  kLoss,
  kBackwardData,
  kBackwardWeights,
  kBackward,    // data and parameter gradients in one call (Layer::fused_backward)
  kAccumulate,  // a fork's later consumer adds its gradient contribution from scratch
  kAllReduce,   // one bucket of parameter gradients (bucket -1: the whole flat buffer)
  kUpdate,      // the optimizer over one bucket's parameters
};
inline constexpr Pass kPasses[] = {Pass::kForward,         Pass::kLoss,     Pass::kBackwardData,
                                   Pass::kBackwardWeights, Pass::kBackward, Pass::kAccumulate,
                                   Pass::kAllReduce,       Pass::kUpdate};
// Also the trace category of the pass: "forward", "backward_data", "optimizer", ...
const char* pass_name(Pass p);

enum class TensorKind {
  kInput,           // the batch and its labels, loaded before the step
  kActivation,      // a node's output
  kActivationGrad,  // the gradient of a node's output
  kParam,           // a parameter's value
  kParamGrad,       // a view into the flat gradient buffer
  kBuffer,          // state kept across steps, not trained (running statistics)
  kSaved,           // written in forward for a later pass (batch statistics, masks)
  kScratch,         // a fork's gradient contribution before it is added
  kLoss,            // labels, probabilities and the loss value
};
std::string_view tensor_kind_name(TensorKind k);

struct TensorInfo {
  std::string name;
  TensorKind kind = TensorKind::kActivation;
  Shape shape;
  DType dtype = DType::kF32;
  int node = -1;      // the graph node it belongs to (-1: none)
  int alias_of = -1;  // a view of another tensor's bytes (flatten's output, scratch views)
};

struct Step {
  Pass pass = Pass::kForward;
  int node = -1;    // graph node of a layer pass or of the loss; -1 for all-reduce and update
  int bucket = -1;  // all-reduce and update
  // Reads a previous step's gradients: the forward strategy's updates, placed before the next
  // step's forward of the layers they update.
  bool from_previous_step = false;
  std::vector<int> reads, writes;  // tensor ids
  std::vector<int> saves;          // what a later pass of this step reads of what this one had
  std::vector<int> dx;             // backward passes: per input slot, the tensor written (-1)
  std::vector<int> after;          // steps (indices) that must finish before this one starts
};

struct Schedule {
  std::vector<Step> steps;
};

// Fills every step's `after` from its reads and writes: it runs after the last earlier writer
// of what it reads, and after the earlier readers and writer of what it overwrites. Any order
// that keeps these edges computes the same step. (Iterations run one after another, so a
// from_previous_step read needs no edge into the previous one.) A view is its base tensor:
// writing the pool's output writes flatten's.
void link_dependencies(Schedule& s, const std::vector<TensorInfo>& tensors);

// What is wrong with a schedule: a read of a tensor that no earlier step wrote (parameters,
// buffers and the loaded batch are given; from_previous_step reads need a writer anywhere), a
// dependency that points forward, or a tensor id out of range. Views count as their base.
std::vector<std::string> check_schedule(const Schedule& s, const std::vector<TensorInfo>& tensors);

// One line per step: "forward conv1 reads[input, conv1.weight] writes[conv1]", for tests and
// `dlbench schedule`-style listings.
std::string describe_step(const Step& step, const std::vector<TensorInfo>& tensors,
                          const std::vector<std::string>& node_names);

}  // namespace dlb
