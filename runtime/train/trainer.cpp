#include "runtime/train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "runtime/core/error.h"
#include "runtime/core/half.h"
#include "runtime/core/hash.h"
#include "runtime/core/nvtx.h"
#include "runtime/overlap/sync_schedule.h"
#include "runtime/train/step_program.h"

namespace dlb {

double RunStats::throughput() const {
  return timed_seconds > 0 ? static_cast<double>(images_per_step * timed_steps) / timed_seconds
                           : 0.0;
}

namespace {

// The tracer's spans of the executor's passes: each traced pass, named by its runner, in its
// category (pass_name, or the sync policy's) on its lane.
class TracedPasses final : public PassObserver {
 public:
  explicit TracedPasses(Tracer& tracer) : tracer_(tracer) {}
  bool wants_marks() const override { return tracer_.active(); }
  void pass_ran(const Step& step, const PassRunner& runner, const Mark& start,
                const Mark& end) override {
    if (!runner.traced(step)) return;
    Span span{runner.label(step), step_name(step), step.lane};
    if (step.pass == Pass::kSync) span.bucket = step.arg < 0 ? kEveryBucket : step.arg;
    span.layer = step.node >= 0 && step.pass != Pass::kLoss && !is_swap_pass(step.pass);
    // A copy's time is its own queue's, not the issuing pass's.
    if (const std::pair<Mark, Mark>* own = runner.lane_marks(step)) {
      tracer_.record(std::move(span), own->first, own->second);
      return;
    }
    tracer_.record(std::move(span), start, end);
  }

 private:
  Tracer& tracer_;
};

// TrainConfig::after_pass_hook after each pass, then the tracer's observer (if any).
class HookedPasses final : public PassObserver {
 public:
  HookedPasses(const Schedule& schedule, const std::function<void(size_t)>& hook,
               PassObserver* next)
      : schedule_(schedule), hook_(hook), next_(next) {}
  bool wants_marks() const override { return true; }
  void pass_ran(const Step& step, const PassRunner& runner, const Mark& start,
                const Mark& end) override {
    if (next_ && next_->wants_marks()) next_->pass_ran(step, runner, start, end);
    hook_(static_cast<size_t>(&step - schedule_.steps.data()));
  }

 private:
  const Schedule& schedule_;
  const std::function<void(size_t)>& hook_;
  PassObserver* next_;
};

}  // namespace

Trainer::Trainer(Backend& backend, Graph& graph, const TrainConfig& config, Rng& init,
                 const Clock* clock)
    : backend_(backend), graph_(graph), config_(config), clock_(clock ? clock : &backend.clock()) {
  Communicator& comm = communicator();
  check_model_and_config(comm);
  // Dropout draws from the step and the rank: ranks with one seed would otherwise drop the same
  // units for the samples at the same place in their batches. Rank 0 draws as one rank does.
  dropout_base_ =
      config.seed * 1000003 + static_cast<uint64_t>(comm.rank()) * 0x9E3779B97F4A7C15ull;
  check_capture();
  // The step's program (every tensor, the schedule, the buckets), then one plan and one binding.
  if (config_.step.swap.kind != SwapPolicy::Kind::kAuto) {
    plan_and_bind(init, false);
  } else {
    bind_within_budget(init);
  }
  start_state();
  make_sync(comm);
  swap_passes_ = std::make_unique<SwapPasses>(backend_, graph_, program_.tensors);
  executor_ = std::make_unique<Executor>(program_.schedule, pass_runners(), *clock_);
}

// --swap=auto fits the plan's tensors to the budget, but the backend's workspace is not in the
// plan and is known only once the layers are set up. So a first binding may go over the budget
// (checked here, not by the allocator); if it does, the program is built again, with the
// workspace now held and counted in the room it has, planned and bound within the budget.
void Trainer::bind_within_budget(Rng& init) {
  const Rng initial = init;
  // The peak of this binding alone: what a layer's setup allocates and frees (an autotuned
  // algorithm's trial buffers) counts too.
  Allocator& memory = backend_.allocator();
  memory.reset_peaks();
  bool fits = false;
  try {
    plan_and_bind(init, true);
    fits = memory.stats().total_peak <= *memory.budget();
  } catch (const OutOfMemory&) {
    // The device itself ran out: built again below, with whatever the backend now holds.
  }
  if (fits) return;
  graph_.unbind();
  init = initial;
  memory.reset_peaks();
  plan_and_bind(init, false);
  replanned_ = true;
}

StepTarget Trainer::step_target() const {
  StepTarget target{backend_.async_input_copies(), config_.loss_readback_steps, 0};
  if (config_.step.swap.kind == SwapPolicy::Kind::kAuto) {
    // The budget less what the device holds already (another trainer's buffers, a
    // communicator's staging, the backend's workspace once the layers were set up).
    const size_t budget = *backend_.allocator().budget();
    const size_t held = backend_.allocator().stats().total_current;
    target.swap_room = budget - std::min(budget, held);
  }
  return target;
}

PassRunners Trainer::pass_runners() {
  PassRunners runners{&graph_, this, grad_sync_.get(), swap_passes_.get()};
  if (param_server_) runners.sync = param_server_.get();
  if (config_.compute_slowdown != 1) {
    slowed_layers_ = std::make_unique<SlowedPasses>(graph_, config_.compute_slowdown);
    PassRunner& loss = *this;
    slowed_loss_ = std::make_unique<SlowedPasses>(loss, config_.compute_slowdown);
    runners.layers = slowed_layers_.get();
    runners.loss = slowed_loss_.get();
  }
  return runners;
}

void Trainer::check_model_and_config(const Communicator& comm) {
  if (!graph_.is_declared() || graph_.is_setup()) {
    throw InvalidArgument(
        "a Trainer binds its graph with the step's other tensors: give it a graph that is "
        "declared (Graph::declare_for) and not yet bound");
  }
  // What the step really has, with the caller's choices, checked as one. Its precision is the
  // one whose policy the graph was declared with: the spec's rules are written for those.
  const PrecisionPolicy& declared = graph_.policy();
  if (!(declared == PrecisionPolicy::for_precision(declared.math))) {
    throw InvalidArgument(fmt::format(
        "the graph is declared with a precision policy that {} does not name: declare it with "
        "PrecisionPolicy::for_precision",
        precision_name(declared.math)));
  }
  StepSpec& spec = config_.step;
  spec.precision = declared.math;
  spec.ranks = comm.size();
  spec.memory_guard = backend_.allocator().guarded();
  spec.memory_budget = backend_.allocator().budget();
  spec.validate();
  if (config_.loss_readback_steps < 1) {
    throw InvalidArgument("the loss read-back interval must be at least one step");
  }
  const PrecisionPolicy& policy = graph_.policy();
  graph_.require(backend_);  // the model's ops first, then the loss's and the optimizer's
  // The loss takes the logits in the activations' dtype and keeps its probabilities in f32.
  backend_.require(Op::kSoftmaxCrossEntropy, OpTypes{policy.math, policy.activations, DType::kF32});
  const Shape& out = graph_.shape(graph_.output());
  if (out.rank() != 2) {
    throw InvalidArgument(fmt::format("the model's output {} is not [batch, classes]", out.str()));
  }
  batch_ = out[0];
  classes_ = out[1];
  // fp16's range loses small gradients without loss scaling; bf16 has float's and needs none.
  if (scaled()) LossScaler::check(config_.loss_scaling);
  Optimizer::require(backend_, policy, scaled());
}

bool Trainer::scaled() const { return loss_scaled(graph_.policy()); }

// Once bound: the state's first values, and the input slots.
void Trainer::start_state() {
  const StepTensorIds& ids = program_.ids;
  const int64_t first_step = 0;
  backend_.copy_from_host(&first_step, graph_.tensor(ids.step_counter));
  if (scaled()) {
    scaler_ = std::make_unique<LossScaler>(backend_, config_.loss_scaling, graph_, ids.loss_scale);
  }
  optimizer_ =
      std::make_unique<Optimizer>(backend_, graph_, ids.momentum, config_.sgd, scaler_.get());
  inputs_[0] = {graph_.input_tensor(), graph_.tensor(ids.labels), {}};
  if (ids.second_images < 0) return;
  // Each slot's mark starts at the work queued so far: a buffer may reuse memory that queued
  // work still uses, and a copy queue knows nothing of it.
  inputs_[1] = {graph_.tensor(ids.second_images), graph_.tensor(ids.second_labels), {}};
  inputs_[0].read = inputs_[1].read = backend_.clock().mark();
}

Communicator& Trainer::communicator() {
  if (config_.comm) return *config_.comm;
  own_comm_ = make_communicator(CommKind::kLocal);
  return *own_comm_;
}

void Trainer::check_capture() const {
  if (!config_.step.capture) return;
  if (const std::string why = backend_.capture_unsupported(); !why.empty()) throw Unsupported(why);
  if (config_.mid_step_hook) {
    throw InvalidArgument("a step captured as a graph cannot call a host hook mid-step");
  }
  if (config_.compute_slowdown != 1) {
    throw InvalidArgument(
        "a captured step replays fixed work: it cannot spin as a straggler between passes");
  }
}

void Trainer::plan_and_bind(Rng& init, bool over_budget) {
  program_ = build_step(graph_, config_.step, step_target());
  // Against the step as it would be without swapping: its host copies are not device bytes.
  naive_plan_bytes_ = naive_plan(program_.schedule, program_.tensors).device_bytes();
  memory_plan_ = plan_step(program_);
  Allocator& memory = backend_.allocator();
  const std::optional<size_t> budget = memory.budget();
  if (over_budget) memory.set_budget(std::nullopt);
  try {
    graph_.bind(backend_, init, memory_plan_, program_.tensors);
  } catch (...) {
    memory.set_budget(budget);
    throw;
  }
  memory.set_budget(budget);
  if (const std::vector<std::string> races =
          check_swaps(program_.schedule, program_.tensors, memory_plan_);
      !races.empty()) {
    throw std::logic_error("the swapped step's copies race its passes: " + races.front());
  }
}

void Trainer::make_sync(Communicator& comm) {
  std::vector<Tensor> slots;
  for (int id : program_.ids.stale_slots) slots.push_back(graph_.tensor(id));
  grad_sync_ = std::make_unique<GradSync>(graph_.flat_gradients(), comm, backend_, *optimizer_,
                                          program_.buckets, std::move(slots));
  if (config_.step.async()) {
    param_server_ = std::make_unique<ParamServer>(graph_, backend_, comm, *optimizer_, *host_);
  }
}

// Images arrive as NCHW floats; a 16-bit input takes them rounded to its type, and a
// channels-last one in NHWC order (in buffers of the trainer's, valid until the next batch).
const void* Trainer::stored_images(const float* images) {
  const Tensor& input = graph_.input_tensor();
  if (input.layout() == Layout::kNHWC) {
    const Shape& s = input.shape();
    channels_last_images_.resize(static_cast<size_t>(input.numel()));
    const int64_t c = s[1], pixels = s[2] * s[3];
    for (int64_t n = 0; n < s[0]; ++n) {
      const float* from = images + n * c * pixels;
      float* to = channels_last_images_.data() + n * c * pixels;
      for (int64_t ch = 0; ch < c; ++ch) {
        for (int64_t p = 0; p < pixels; ++p) to[p * c + ch] = from[ch * pixels + p];
      }
    }
    images = channels_last_images_.data();
  }
  if (input.dtype() == DType::kF32) return images;
  narrowed_images_.resize(input.bytes());
  floats_to_dtype(images, input.numel(), input.dtype(), narrowed_images_.data());
  return narrowed_images_.data();
}

void Trainer::load_batch(const float* images, const int64_t* labels) {
  static const std::string kName = "batch to device";
  // Labels are checked here, on the host, for every backend: a GPU's loss kernel cannot throw
  // (an out-of-range label would make the loss NaN there).
  const int64_t classes = graph_.shape(graph_.output())[1];
  for (int64_t i = 0; i < batch_; ++i) {
    if (labels[i] < 0 || labels[i] >= classes) {
      throw InvalidArgument(
          fmt::format("label {} of sample {} is outside [0, {})", labels[i], i, classes));
    }
  }
  const Tensor& input = graph_.input_tensor();
  const void* src = stored_images(images);
  if (!backend_.async_input_copies()) {
    TraceScope scope(
        tracer_, kName, kCopyCategory, Lane::kCopy,
        static_cast<double>(input.bytes() + graph_.tensor(program_.ids.labels).bytes()));
    backend_.copy_from_host(src, graph_.input_tensor());
    backend_.copy_from_host(labels, graph_.tensor(program_.ids.labels));
    ++batches_loaded_;
    return;
  }
  // Double-buffered: into the slot the graph does not read now (slot 0 first), after the last
  // compute that read it; the compute queued from here on waits for the copy.
  const int target = batches_loaded_++ == 0 ? 0 : current_input_ ^ 1;
  InputSlot& slot = inputs_[target];
  NvtxRange range(kName.c_str());
  const Backend::CopyMarks image_copy = backend_.copy_in(src, slot.images, slot.read);
  const Backend::CopyMarks label_copy = backend_.copy_in(labels, slot.labels, slot.read);
  backend_.wait_for_input(image_copy.end);
  backend_.wait_for_input(label_copy.end);
  // On the copy lane, at the copy queue's times (a span of the step queued before it).
  if (tracer_ && tracer_->active() &&
      tracer_->on_device() == static_cast<bool>(image_copy.start.device)) {
    Span span{kName, kCopyCategory, Lane::kCopy};
    span.bytes = static_cast<double>(slot.images.bytes() + slot.labels.bytes());
    tracer_->record(std::move(span), image_copy.start, label_copy.end);
  }
  graph_.rebind_input(slot.images);
  graph_.tensor(program_.ids.labels) = slot.labels;
  current_input_ = target;
}

void Trainer::mark_input_read() {
  if (backend_.async_input_copies()) inputs_[current_input_].read = backend_.clock().mark();
}

const std::string& Trainer::label(const Step& step) const {
  static const std::string kLoss = "loss";
  (void)step;
  return kLoss;
}

void Trainer::run_pass(const Step& step, const LayerContext* ctx) {
  (void)step, (void)ctx;
  Tensor& loss = graph_.tensor(program_.ids.loss);
  backend_.softmax_cross_entropy(graph_.output_tensor(), graph_.tensor(program_.ids.labels),
                                 graph_.tensor(program_.ids.probs), loss);
  if (scaler_) {
    scaler_->scaled_loss_gradient(graph_.tensor(program_.ids.probs),
                                  graph_.tensor(program_.ids.labels), graph_.output_grad());
  } else {
    backend_.softmax_cross_entropy_backward(graph_.tensor(program_.ids.probs),
                                            graph_.tensor(program_.ids.labels),
                                            graph_.output_grad());
  }
  if (config_.mid_step_hook) config_.mid_step_hook(static_cast<int64_t>(step_));
}

void Trainer::set_tracer(Tracer* tracer) {
  if (tracer && config_.step.capture) {
    throw Unsupported("a replayed step has no spans of its passes to trace");
  }
  if (tracer && &tracer->clock() != clock_) {
    throw InvalidArgument(
        "the tracer must read the trainer's clock (Backend::clock() unless given)");
  }
  tracer_ = tracer;
  traced_passes_ = tracer ? std::make_unique<TracedPasses>(*tracer) : nullptr;
  grad_sync_->set_tracer(tracer);
}

void Trainer::run_step_work(Tracer* tracer) {
  Tensor& step_counter = graph_.tensor(program_.ids.step_counter);
  const LayerContext ctx{backend_, true, DropoutSeed{dropout_base_, &step_counter}};
  PassObserver* observer = tracer ? traced_passes_.get() : nullptr;
  if (config_.after_pass_hook) {
    HookedPasses hooked(executor_->schedule(), config_.after_pass_hook, observer);
    executor_->run(static_cast<int64_t>(step_), &ctx, &hooked);
  } else {
    executor_->run(static_cast<int64_t>(step_), &ctx, observer);
  }
  backend_.increment(step_counter);
}

std::unique_ptr<CapturedWork> Trainer::capture_step_work() {
  // A graph keeps the addresses it was captured with: memory allocated while capturing (and
  // released later) could be handed to another tensor while replays still write it. The eager
  // first step has made every buffer the step needs, so capturing allocates nothing.
  const uint64_t allocations = backend_.allocator().allocations();
  try {
    backend_.begin_capture();
    run_step_work(nullptr);
  } catch (const Unsupported& e) {  // a call the capture refused (the CUDA backend: 900-908)
    backend_.abandon_capture();
    throw Unsupported(fmt::format("--cuda-graph: the step could not be captured: {}", e.what()));
  } catch (...) {
    backend_.abandon_capture();
    throw;
  }
  std::unique_ptr<CapturedWork> work = backend_.end_capture();
  if (const uint64_t made = backend_.allocator().allocations() - allocations; made > 0) {
    throw Unsupported(fmt::format(
        "--cuda-graph: the step allocated memory {} times while it was captured; a graph must "
        "replay on memory that stays its own",
        made));
  }
  if (graph_stats_.graphs++ == 0) graph_stats_.operations = work->operations();
  return work;
}

void Trainer::step() {
  static const std::string kStep = "step";
  // The first step runs op by op: it makes the plans, workspaces and library state that a
  // capture must find already made.
  constexpr uint64_t kEagerSteps = 1;
  if (tracer_) tracer_->begin_step(static_cast<int64_t>(step_));
  {
    TraceScope step_scope(tracer_, kStep, kStepCategory, Lane::kHost);
    if (config_.step.capture && step_ >= kEagerSteps) {
      // Scratch that moved (a workspace grown after the capture) leaves a graph writing memory
      // it no longer owns: capture again.
      if (captured_scratch_ != backend_.scratch_generation()) {
        for (auto& work : captured_) work.reset();
        captured_scratch_ = backend_.scratch_generation();
      }
      std::unique_ptr<CapturedWork>& work = captured_[current_input_];
      if (!work) work = capture_step_work();
      work->replay();
      ++graph_stats_.replayed_steps;
    } else {
      run_step_work(tracer_);
    }
  }
  ++step_;
  // Outside the captured work: the loss's place in the history changes every step.
  Tensor slot = graph_.tensor(program_.ids.loss_history).slice_flat(unread_++, 1);
  backend_.copy(graph_.tensor(program_.ids.loss), slot);
  mark_input_read();
  if (unread_ == config_.loss_readback_steps) read_back_losses();
}

void Trainer::read_back_losses() {
  static const std::string kCopy = "loss to host";
  if (unread_ == 0) return;
  const Tensor unread = graph_.tensor(program_.ids.loss_history).slice_flat(0, unread_);
  TraceScope scope(tracer_, kCopy, kCopyCategory, Lane::kCopy, static_cast<double>(unread.bytes()));
  std::vector<float> host(static_cast<size_t>(unread_));
  backend_.copy_to_host(unread, host.data());
  losses_.insert(losses_.end(), host.begin(), host.end());
  unread_ = 0;
}

std::vector<float> Trainer::take_losses() {
  read_back_losses();
  return std::exchange(losses_, {});
}

int64_t Trainer::count_correct(int64_t count) {
  const LayerContext ctx{backend_, false, 0};
  graph_.forward(ctx);
  const Tensor& out = graph_.output_tensor();
  std::vector<unsigned char> stored(out.bytes());
  std::vector<float> logits(out.numel());
  std::vector<int64_t> labels(batch_);
  backend_.copy_to_host(out, stored.data());
  dtype_to_floats(stored.data(), out.numel(), out.dtype(), logits.data());
  backend_.copy_to_host(graph_.tensor(program_.ids.labels), labels.data());
  mark_input_read();  // after the last read of the slot
  int64_t correct = 0;
  for (int64_t i = 0; i < std::min(count, batch_); ++i) {
    const float* row = logits.data() + i * classes_;
    const int64_t best = std::max_element(row, row + classes_) - row;
    correct += best == labels[i];
  }
  return correct;
}

void Trainer::broadcast_state(bool buffers_only) {
  Communicator* comm = config_.comm;
  StateDict state = graph_.state_dict();  // parameters and batch-norm running statistics
  std::set<std::string> params;
  if (buffers_only) {
    for (const auto& np : graph_.named_params()) params.insert(np.name);
  }
  for (auto& [name, t] : state) {
    if (params.count(name)) continue;
    // Host memory whatever the backend: the communicators broadcast host buffers (nccl's go
    // through its MPI bootstrap). On the CPU that is the backend's own memory, and counts there.
    Allocator& staging = backend_.stream().on_device() ? *host_ : backend_.allocator();
    Tensor host(staging.allocate(t.bytes.size(), MemCategory::kComm, name), t.shape, t.dtype);
    std::memcpy(host.raw(), t.bytes.data(), t.bytes.size());
    comm->broadcast(host, 0);
    std::memcpy(t.bytes.data(), host.raw(), t.bytes.size());
  }
  graph_.load_state_dict(state);
}

void Trainer::broadcast_weights() {
  Communicator* comm = config_.comm;
  if (!comm || comm->size() == 1) return;
  broadcast_state(false);
  if (!weights_identical_across_ranks()) {
    throw CommError("after the broadcast from rank 0, the ranks' weight checksums differ");
  }
}

void Trainer::broadcast_buffers() {
  Communicator* comm = config_.comm;
  if (!comm || comm->size() == 1) return;
  flush();  // the forward strategy's pending updates, so the loaded state is the current one
  broadcast_state(true);
}

uint64_t Trainer::weights_checksum() {
  flush();
  uint64_t h = kFnv1aOffset;
  std::vector<unsigned char> bytes;
  for (const auto& np : graph_.named_params()) {
    bytes.resize(np.param.value.bytes());
    backend_.copy_to_host(np.param.value, bytes.data());
    h = fnv1a(bytes.data(), bytes.size(), h);
  }
  return h;
}

bool Trainer::weights_identical_across_ranks() {
  if (!config_.comm) return true;
  const auto sums = config_.comm->allgather(weights_checksum());
  return std::all_of(sums.begin(), sums.end(), [&](uint64_t x) { return x == sums[0]; });
}

void Trainer::flush() {
  grad_sync_->flush();
  if (param_server_) param_server_->flush();
}

std::vector<int64_t> Trainer::async_staleness() const {
  return param_server_ ? param_server_->staleness() : std::vector<int64_t>{};
}

void Trainer::set_learning_rate(float lr) {
  if (lr == optimizer_->config().lr) return;
  if (config_.step.capture) {
    throw InvalidArgument(
        "a captured step (--cuda-graph) bakes its learning rate in: a learning-rate rule that "
        "changes it (--lr-warmup, --lr-schedule) cannot run with it");
  }
  optimizer_->set_lr(lr);
}

float Trainer::learning_rate() const { return optimizer_->config().lr; }

LoopResult Trainer::train(const TrainingLoop& loop) {
  if (loop.warmup < 0 || loop.steps_per_epoch < 0 || loop.max_epochs < 1) {
    throw InvalidArgument(fmt::format("a loop of {} warm-up steps and {} epochs of {} steps",
                                      loop.warmup, loop.max_epochs, loop.steps_per_epoch));
  }
  LoopResult out;
  for (int64_t i = 0; i < loop.warmup; ++i) step();
  out.warmup_losses = take_losses();
  backend_.synchronize();  // the first epoch starts on an idle device
  for (int64_t e = 1; e <= loop.max_epochs; ++e) {
    if (loop.before_epoch) loop.before_epoch(e);
    out.epochs.push_back(run_epoch(loop, e));
    if (loop.after_epoch && !loop.after_epoch(out.epochs.back())) break;
  }
  if (tracer_) tracer_->end_window();
  return out;
}

EpochStats Trainer::run_epoch(const TrainingLoop& loop, int64_t epoch) {
  EpochStats s;
  s.epoch = epoch;
  // Asynchronous SGD over a data set: the epoch is its worth of steps from every rank together,
  // each rank stepping at its own pace (runtime/overlap/param_server.h).
  const bool paced = param_server_ && loop.load;
  if (paced) param_server_->start_epoch(loop.steps_per_epoch * param_server_->ranks());
  // Step boundaries are marks on the trainer's clock: on a GPU, events on the compute stream,
  // so a step's time is the device's, however far ahead of it the host has queued work.
  std::vector<Mark> marks{clock_->mark()};
  for (int64_t i = 0; paced ? !param_server_->epoch_done() : i < loop.steps_per_epoch; ++i) {
    if (loop.load) loop.load(epoch, i);
    step();
    marks.push_back(clock_->mark());
  }
  s.steps = static_cast<int64_t>(marks.size()) - 1;
  // The trace window ends with the last step: reductions still in flight count up to here.
  if (tracer_ && epoch == loop.max_epochs) tracer_->end_window();
  flush();  // the last step's deferred updates belong to the epoch's work
  const Mark end = clock_->mark();
  backend_.synchronize();
  for (size_t i = 1; i < marks.size(); ++i) {
    s.step_seconds.push_back(clock_->elapsed_us(marks[i - 1], marks[i]) * 1e-6);
  }
  s.seconds = clock_->elapsed_us(marks.front(), end) * 1e-6;
  s.losses = take_losses();
  return s;
}

double EpochStats::mean_loss() const {
  double sum = 0;
  for (float l : losses) sum += l;
  return losses.empty() ? 0.0 : sum / static_cast<double>(losses.size());
}

RunStats Trainer::run(int64_t warmup, int64_t steps) {
  LoopResult r = train(TrainingLoop{warmup, steps, 1, {}, {}, {}});
  EpochStats& timed = r.epochs.front();
  RunStats s;
  s.warmup_steps = warmup;
  s.timed_steps = steps;
  s.images_per_step = batch_;
  s.step_seconds = std::move(timed.step_seconds);
  s.timed_seconds = timed.seconds;
  s.losses = std::move(r.warmup_losses);
  s.losses.insert(s.losses.end(), timed.losses.begin(), timed.losses.end());
  return s;
}

}  // namespace dlb
