// Training steps on one graph: the step is a schedule (forward, softmax cross-entropy, backward,
// and the sync policy's all-reduces and updates) that an executor runs. Throughput is images in
// the timed steps over their wall time, with the device synchronised, as docs/metrics.md defines
// it. Losses stay on the device and are read back in batches, so a GPU is never stalled by the
// host.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/comm/communicator.h"
#include "runtime/core/clock.h"
#include "runtime/nn/graph.h"
#include "runtime/nn/swap.h"
#include "runtime/optim/optimizer.h"
#include "runtime/overlap/bucket_plan.h"
#include "runtime/overlap/grad_sync.h"
#include "runtime/overlap/param_server.h"
#include "runtime/trace/tracer.h"
#include "runtime/train/captured_steps.h"
#include "runtime/train/evaluation.h"
#include "runtime/train/executor.h"
#include "runtime/train/input_slots.h"
#include "runtime/train/loss_pass.h"
#include "runtime/train/step_program.h"
#include "runtime/train/step_spec.h"
#include "runtime/train/straggler.h"
#include "runtime/train/swap_passes.h"

namespace dlb {

struct TrainConfig {
  SgdConfig sgd;
  uint64_t seed = 0;
  // Every choice that shapes the step (runtime/train/step_spec.h). Its precision, ranks, memory
  // guard and memory budget are what the step really has: the Trainer reads them from the
  // graph's declaration, the communicator and the backend's allocator, and checks the whole
  // through StepSpec::validate before it builds the step's program.
  StepSpec step;
  // Data parallelism: gradients are averaged across the communicator's ranks by the overlap
  // strategy (runtime/overlap/sync_schedule.h). Null: one rank.
  Communicator* comm = nullptr;
  // Losses kept on the device before a read-back (which synchronises).
  int64_t loss_readback_steps = 64;
  // fp16 runs: dynamic loss scaling (GradScaler's defaults), or a fixed scale (growth and
  // backoff 1). Other precisions have none.
  LossScaleConfig loss_scaling;
  // An injected straggler (runtime/train/straggler.h): this rank's compute passes take this many
  // times as long. 1: none. Host backends only.
  double compute_slowdown = 1;
  // Test-only: called after each pass the executor issues, with the pass's index in the
  // schedule (the memory plan's poison test: tests/unit/memory_plan_test.cpp).
  std::function<void(size_t)> after_pass_hook;
  // Test-only: called between forward and backward with the step's index.
  std::function<void(int64_t)> mid_step_hook;
};

struct EpochStats {
  int64_t epoch = 0, steps = 0;
  // From the mark before its first step to the one after its last update (the device
  // synchronised), on the trainer's clock: steps, loads and the last step's deferred updates.
  double seconds = 0;
  std::vector<double> step_seconds;  // between the marks that bracket each step
  std::vector<float> losses;         // each step's
  double mean_loss() const;
};

// The one training loop (Trainer::train): timed steps on a loaded batch, an epoch over a data
// set, and epochs to a target accuracy are each this loop with its hooks. Epochs count from 1.
struct TrainingLoop {
  int64_t warmup = 0;  // untimed steps before the first epoch, on the batch loaded already
  // With asynchronous SGD and a load hook, the steps of every rank together are this times the
  // ranks, and each rank takes as many as its pace allows (`step` may go past this).
  int64_t steps_per_epoch = 0;
  int64_t max_epochs = 1;
  std::function<void(int64_t epoch)> before_epoch;  // MLPerf's epoch_start, a shuffle
  // Loads step `step`'s batch (Trainer::load_batch) before it runs; unset: every step trains on
  // the batch loaded already. Inside the epoch's time.
  std::function<void(int64_t epoch, int64_t step)> load;
  // After each epoch, its updates applied: evaluation, logging. Returns whether to go on.
  std::function<bool(const EpochStats& epoch)> after_epoch;
};

struct LoopResult {
  std::vector<float> warmup_losses;
  std::vector<EpochStats> epochs;  // those that ran: an after_epoch hook may stop early
};

struct RunStats {
  int64_t warmup_steps = 0, timed_steps = 0, images_per_step = 0;
  double timed_seconds = 0;
  std::vector<double> step_seconds;  // timed steps only
  std::vector<float> losses;         // every step, warm-up included
  double throughput() const;         // images per second over the timed steps
};

class Trainer final {
 public:
  // `graph` must be declared for `backend` (Graph::declare_for; its precision policy is the
  // run's) and not bound: the trainer builds the step's program from it (build_step: the step's
  // other tensors in the program's table, its schedule and buckets), plans the whole table
  // (config.step.memory_plan) and binds it once, initialising the parameters from `init`. Times
  // come from `clock` (the backend's, Backend::clock(), when null), which must outlive the trainer.
  Trainer(Backend& backend, Graph& graph, const TrainConfig& config, Rng& init,
          const Clock* clock = nullptr);
  // The step's storage goes with it: the work the backend queued on it runs first.
  ~Trainer();
  // Its runners hold references into its program: a Trainer stays where it was made.
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Throws Unsupported, before anything is allocated, where `backend` cannot run a step of
  // `graph` (declared): the model's ops, then the loss's and the optimizer's.
  static void require(const Backend& backend, const Graph& graph);
  // What `backend` and `config`'s loop add to its spec (build_step's StepTarget): with
  // --swap=auto, the room is the budget less what the device holds now, so the layers' plans
  // (Graph::plan_ops) come first and their workspace is counted.
  static StepTarget step_target(Backend& backend, const TrainConfig& config);
  // Copies one batch from the host onto the backend; the next step trains on it. Where the
  // backend's input copies are asynchronous (a GPU), the batch goes into the input buffer the
  // last step did not read, on the copy queue, so it is copied while that step still computes.
  void load_batch(const float* images, const int64_t* labels);
  // The same for a batch of JPEG files, decoded on the device (--decode=gpu; InputSlots).
  void load_encoded_batch(const std::vector<EncodedImage>& images, const ImageNormalization& norm,
                          const int64_t* labels);
  // What decoded the batches of files: the device decoder's name, or empty.
  std::string image_decoder() const;
  // Batches of files decoded so far, and the decoder's own time for them
  // (InputSlots::decode_seconds). set_image_decoder: another decoder than the backend's.
  int64_t decoded_batches() const { return inputs_->decoded_batches(); }
  size_t image_decoder_bytes() const { return inputs_->decoder_bytes(); }
  double decode_seconds() const { return inputs_->decode_seconds(); }
  void set_image_decoder(std::unique_ptr<ImageDecoder> decoder) {
    inputs_->set_decoder(std::move(decoder));
  }
  // A full step on the loaded batch. Its loss stays on the device until take_losses().
  void step();
  // The losses of the steps since the last call, in order (this synchronises).
  std::vector<float> take_losses();
  // Inference-mode forward on the loaded batch; how many of the first `count` samples the
  // model classifies correctly.
  int64_t count_correct(int64_t count);
  // The training loop: warm-up, then epochs of steps, each timed on the trainer's clock.
  LoopResult train(const TrainingLoop& loop);
  // `warmup` untimed steps, then `steps` timed ones, on the loaded batch: one epoch of train().
  // `load`, where given, loads each timed step's batch (TrainingLoop::load), inside its time.
  RunStats run(int64_t warmup, int64_t steps,
               std::function<void(int64_t epoch, int64_t step)> load = {});
  const Clock& clock() const { return *clock_; }
  // The optimizer's rate for the updates from now on (a learning-rate rule sets it before each
  // step). With the forward strategy, a step's updates run in the next step's forward, at the
  // rate set for that step. A captured step (StepSpec::capture) bakes its rate in: InvalidArgument.
  void set_learning_rate(float lr);
  float learning_rate() const;

  int64_t batch() const { return batch_; }
  // Makes every rank's parameters and buffers rank 0's, then checks that they agree (CommError
  // if they do not).
  void broadcast_weights();
  // Makes every rank's buffers (batch-norm running statistics) rank 0's, as DDP's
  // broadcast_buffers does: each rank's statistics follow its own data, and an evaluation that
  // is split across ranks needs one model.
  void broadcast_buffers();
  // FNV-1a over the bytes of every parameter: equal across ranks iff the weights are.
  uint64_t weights_checksum();
  // All-gathers the checksums (a collective: every rank must call it).
  bool weights_identical_across_ranks();
  // Applies every pending update (the forward strategy defers them to the next forward).
  void flush();
  // --sync=async: the staleness of each update the parameter server applied (rank 0's record;
  // empty elsewhere and without async).
  std::vector<int64_t> async_staleness() const;
  const BucketPlan& bucket_plan() const { return program_.buckets; }
  // The step as the executor runs it.
  const Schedule& schedule() const { return executor_->schedule(); }
  // The step's program: its table (the graph's tensors, then the step's), schedule and buckets.
  const StepProgram& program() const { return program_; }
  const std::vector<TensorInfo>& tensors() const { return program_.tensors; }
  // Where the step's tensors are stored, and the device bytes naive_plan would have allocated
  // (for the step as it would be without swapping).
  const MemoryPlan& memory_plan() const { return memory_plan_; }
  size_t naive_plan_bytes() const { return naive_plan_bytes_; }
  // The step's tensors as stored: the program's table, bound once (Graph::bind). The graph runs
  // on it while the trainer lives.
  const BoundStep& bound() const { return bound_; }
  // The activations swapped (config.step.swap): their tensor ids.
  const std::vector<int>& swapped() const { return program_.swapped; }
  // The loss scaler of an fp16 run (null otherwise).
  LossScaler* loss_scaler() { return scaler_.get(); }
  const StepGraphStats& step_graphs() const { return captured_.stats(); }
  // Spans of the steps inside the tracer's window (null: no tracing). Steps count from 0 over
  // every step() call, warm-up included.
  // A captured step has no spans of its own passes (a graph replays as one launch): a trainer
  // with StepSpec::capture refuses a tracer.
  // The tracer must read the trainer's clock: the executor's marks of the passes are its spans.
  void set_tracer(Tracer* tracer);

 private:
  StepProgram program_;
  MemoryPlan memory_plan_;
  size_t naive_plan_bytes_ = 0;
  // Before the runners that read it, so it outlives them.
  BoundStep bound_;
  // The constructor's parts, in order (after communicator(), whose ranks the spec checks).
  void check_model_and_config(const Communicator& comm);
  Communicator& communicator();  // the config's, or a local one of one rank
  void check_capture() const;
  // The step's program built (program_), planned (memory_plan_) and bound, once.
  void plan_and_bind(Rng& init);
  void start_state();
  // The sync policy's runner: GradSync, and with async the parameter server.
  void make_sync(Communicator& comm);
  // The executor's runners: with a straggler, the layers and the loss slowed.
  PassRunners pass_runners();
  bool scaled() const;  // fp16: a loss scaler
  // One step's work, queued op by op: the schedule, then the step counter's advance.
  void run_step_work(Tracer* tracer);
  void broadcast_state(bool buffers_only);
  void read_back_losses();
  EpochStats run_epoch(const TrainingLoop& loop, int64_t epoch);

  Backend& backend_;
  Graph& graph_;
  TrainConfig config_;
  const Clock* clock_;
  // Host staging for broadcasts.
  std::shared_ptr<Allocator> host_ = std::make_shared<Allocator>(make_host_memory_resource());
  int64_t batch_;
  std::unique_ptr<InputSlots> inputs_;  // the batch and its labels, double-buffered
  int64_t unread_ = 0;
  std::vector<float> losses_;               // read back, not yet taken
  std::unique_ptr<Communicator> own_comm_;  // local, when the config has none
  std::unique_ptr<LossScaler> scaler_;
  std::unique_ptr<ParamServer> param_server_;  // --sync=async
  std::unique_ptr<LossPass> loss_pass_;
  std::unique_ptr<SlowedPasses> slowed_layers_, slowed_loss_;  // an injected straggler's
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<GradSync> grad_sync_;
  std::unique_ptr<SwapPasses> swap_passes_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<Evaluation> evaluation_;       // count_correct's
  std::unique_ptr<PassObserver> traced_passes_;  // the tracer's spans of the executor's passes
  uint64_t step_ = 0;
  uint64_t dropout_base_ = 0;         // dropout draws from it plus the step counter (StepTensorIds)
  CapturedSteps captured_{backend_};  // StepSpec::capture
  Tracer* tracer_ = nullptr;
};

}  // namespace dlb
