// The training step as data (docs/architecture.md, "The step"): a list of passes, each on a lane,
// naming the tensors it reads, writes and saves for later passes. The graph emits forward and
// backward; the step's program adds the loss (runtime/train/step_program.h); a sync policy adds
// its own passes (runtime/overlap/
// sync_schedule.h: all-reduce, wait, update, progress); an executor runs the list, handing each
// pass to its PassRunner. A memory planner, recomputation or swapping is a transformation of
// this list.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/core/clock.h"
#include "runtime/core/dtype.h"
#include "runtime/core/lane.h"
#include "runtime/core/shape.h"
#include "runtime/memory/allocator.h"
#include "runtime/memory/tensor.h"

namespace dlb {

enum class Pass {
  kForward,
  kLoss,
  kBackwardData,
  kBackwardWeights,
  kBackward,    // data and parameter gradients in one call (Layer::fused_backward)
  kAccumulate,  // a fork's later consumer adds its gradient contribution from scratch
  kSync,        // a pass of the sync policy: what it is (Step::op) is the policy's to say
  // A forward pass run again before backward, for outputs that recomputation dropped after their
  // forward use (runtime/nn/recompute.h): the same outputs, and no state changed.
  kRecompute,
  // Swapping (runtime/nn/swap.h). A swap pass's tensors: `y`, the activation on the device, and
  // `x[0]`, its copy in host memory. A copy runs on the copy lane, after the compute work before
  // it; compute runs after a copy only from a wait on.
  kSwapOut,   // copy lane: y into its host copy, after y's last use before backward
  kSwapIn,    // copy lane: the host copy back into y, ahead of the backward pass that reads it
  kSwapWait,  // compute lane: what comes after it runs after y's latest copy
};
inline constexpr Pass kLayerAndLossPasses[] = {
    Pass::kForward,  Pass::kLoss,       Pass::kBackwardData, Pass::kBackwardWeights,
    Pass::kBackward, Pass::kAccumulate, Pass::kRecompute};
inline constexpr Pass kSwapPasses[] = {Pass::kSwapOut, Pass::kSwapIn, Pass::kSwapWait};
constexpr bool is_swap_pass(Pass p) {
  return p == Pass::kSwapOut || p == Pass::kSwapIn || p == Pass::kSwapWait;
}
// Also the trace category of the pass: "forward", "backward_data", ...; "sync" for kSync (a
// step's own name is step_name's).
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
  // Written by an earlier step and read by a later one (a view of the tensor that holds it): the
  // forward strategy's gradients, reduced in one step and applied in the next.
  kCarried,
  // Storage that other tensors are disjoint slices of, with no meaning of its own: the flat
  // gradient buffer, whose slices are the parameter gradients (kParamGrad). A pass names the
  // slices, never the buffer.
  kGradientBuffer,
  // An activation's copy in host memory while it is swapped out (MemCategory::kHostSwap).
  kSwapped,
};
std::string_view tensor_kind_name(TensorKind k);

// A tensor of the step, as declared: what it is, and how it is stored. Declaring allocates
// nothing; a MemoryPlan (memory_plan.h) gives every tensor that is not a view its storage.
struct TensorInfo {
  std::string name;
  TensorKind kind = TensorKind::kActivation;
  Shape shape;
  DType dtype = DType::kF32;
  int node = -1;  // the graph node it belongs to (-1: none)
  // A view of another tensor's bytes: flatten's output, a fused ReLU's, their gradients, a fork's
  // scratch, a parameter's gradient (a slice of the flat buffer), a carried gradient.
  int alias_of = -1;
  MemCategory category = MemCategory::kActivations;
  Layout layout = Layout::kNCHW;  // 4-D tensors only; every other rank is NCHW
  int64_t offset = 0;             // a view: its first element in the tensor it views
  // One of `turns` tensors used in turn (a stale slot): iteration t touches it only where
  // t mod turns == turn, whatever its passes name, so the iteration before that touched it is
  // `turns` back. 0: every iteration touches what its passes name.
  int turns = 0, turn = 0;
  size_t bytes() const { return static_cast<size_t>(shape.numel()) * dtype_size(dtype); }
};

// Appends `info` to `table` (a step's tensors, declared: runtime/train/step_program.h) and
// returns its id.
int declare_tensor(std::vector<TensorInfo>& table, TensorInfo info);

// The tensor whose dependencies a view shares: the tensor it views, and so on, up to (not
// including) a kGradientBuffer, whose slices are disjoint (itself if it is no view).
int dependency_base(int id, const std::vector<TensorInfo>& tensors);

// The tensor that stores `id`'s bytes: the end of its chain of views (itself if it is no view).
// What a memory plan allocates, and what its transformations reason about.
int storage_of(int id, const std::vector<TensorInfo>& tensors);

// An edge into an earlier iteration: the pass runs after pass `pass` of the iteration `distance`
// (>= 1) before its own (link_dependencies).
struct CarriedEdge {
  int pass = -1;
  int distance = 1;
  bool operator==(const CarriedEdge& o) const { return pass == o.pass && distance == o.distance; }
};

// How a pass orders the lanes beyond each lane's own order (runtime/nn/lane_order.h).
enum class Join {
  kNone,  // queued on its lane
  // A wait: what its lane runs after it runs after its predecessors on other lanes have ended
  // (a reduction's wait, a swap's wait; on a GPU, the stream waits on their events).
  kLanes,
  // The host waits for it to end before it issues the next pass (an asynchronous SGD push, whose
  // copy of the gradients to host memory synchronises the device; the messages it sends are its
  // runner's to wait for before it touches their buffers again).
  kHost,
  // The host has done with the host memory it reads or writes when it returns, but its device
  // work may still be queued (an asynchronous SGD pull: it stages the weights from host memory,
  // then copies them to the device on the compute queue).
  kHostMemory,
};

struct Step;
// Whether `step` reads any view of storage `s` (a storage_of id).
bool reads_storage(const Step& step, int s, const std::vector<TensorInfo>& tensors);

struct Step {
  Pass pass = Pass::kForward;
  Lane lane = Lane::kCompute;
  int node = -1;  // graph node of a layer pass or of the loss; -1 for the sync policy's
  // kSync: the policy's own kind of pass, its argument (a bucket), and its name ("allreduce",
  // "optimizer", ...: a static string). What they mean is the policy's alone.
  int op = -1, arg = -1;
  const char* op_name = nullptr;
  std::vector<int> reads, writes;  // tensor ids
  std::vector<int> saves;          // what a later pass of this step reads of what this one had
  // A layer pass's tensors by role, which its runner binds them as: per input slot, its input
  // (x); its output (y); the gradient of its output (dy, backward); per input slot, the gradient
  // it writes (dx, backward; -1 for none). A backward pass is handed x and y whether or not it
  // reads them: what it reads (Layer::backward_data_reads) is in `reads`, and only that may a
  // planner count on holding its contents.
  std::vector<int> x;
  int y = -1, dy = -1;
  std::vector<int> dx;
  std::vector<int> after;  // steps (indices) that must finish before this one starts
  // Passes of earlier iterations that must finish before this one starts: the writer of what it
  // reads before any pass of its own iteration writes it (a carried gradient, a stale slot, the
  // weights an update wrote), and the later readers and writer of what it overwrites.
  std::vector<CarriedEdge> carried;
  Join join = Join::kNone;
};

struct Schedule {
  std::vector<Step> steps;
};

// A pass's name: pass_name, or the sync policy's name for its own.
const char* step_name(const Step& step);

// Fills every step's `after` from its reads and writes: it runs after the last earlier writer
// of what it reads, and after the earlier readers and writer of what it overwrites. Any order
// that keeps these edges computes the same step. A view is its base tensor: writing the pool's
// output writes flatten's. It also fills `carried`, the edges into the iteration that last
// touched a tensor before (one back, or a slot's `turns` back): a read with no writer before it
// in its iteration runs after that iteration's last writer of it; a write runs after that
// iteration's last writer of it past its own place in the list, and the readers past both.
void link_dependencies(Schedule& s, const std::vector<TensorInfo>& tensors);

// What is wrong with a schedule: a read of a tensor that no earlier step wrote (parameters,
// buffers and the loaded batch are given; a carried tensor needs a writer anywhere), a
// dependency that points forward, a carried edge out of range, or a tensor id out of range.
// Views count as their base.
std::vector<std::string> check_schedule(const Schedule& s, const std::vector<TensorInfo>& tensors);

// One line per step: "forward conv1 reads[input, conv1.weight] writes[conv1]", "allreduce 3
// reads[...]", for tests and `dlbench schedule`-style listings.
std::string describe_step(const Step& step, const std::vector<TensorInfo>& tensors,
                          const std::vector<std::string>& node_names);

struct LayerContext;

// Who runs a kind of pass: the graph its layers', the trainer the loss, the sync policy its own.
// The executor hands each pass to its runner; a simulator's runners advance a virtual clock
// instead (runtime/train/replay.h).
class PassRunner {
 public:
  virtual ~PassRunner() = default;
  // `ctx`: what the passes compute with; null in a replay, whose runners compute nothing.
  virtual void run_pass(const Step& step, const LayerContext* ctx) = 0;
  // The pass's name in traces, NVTX ranges and messages ("layer1.0.conv1", "loss", "sgd
  // bucket"); it must live as long as the runner.
  virtual const std::string& label(const Step& step) const = 0;
  // Whether a trace shows the pass as a span of its lane (the executor's marks of it).
  virtual bool traced(const Step& step) const {
    (void)step;
    return true;
  }
  // The executor begins step `index` (its caller's count of steps: the Trainer's, from 0, which a
  // captured step's replays advance without a run): a runner whose passes depend on which step it
  // is (a stale step's slot, which capture refuses) reads it here.
  virtual void begin_step(int64_t index) { (void)index; }
  // Where the pass's work runs on a queue of its own (a swap's copy), that queue's marks of the
  // pass just run, which a trace shows instead of the executor's; null: the executor's marks
  // around the pass are its time.
  virtual const std::pair<Mark, Mark>* lane_marks(const Step& step) const {
    (void)step;
    return nullptr;
  }
};

}  // namespace dlb
