#include "runtime/train/trainer.h"

#include <fmt/format.h>

#include <algorithm>

#include "runtime/core/error.h"
#include "runtime/train/pass_observers.h"
#include "runtime/train/replicas.h"
#include "runtime/train/step_program.h"

namespace dlb {

double RunStats::throughput() const {
  return timed_seconds > 0 ? static_cast<double>(images_per_step * timed_steps) / timed_seconds
                           : 0.0;
}

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
  // The layers' plans first: the workspace their algorithms need is then held, so the room
  // --swap=auto fits the step's tensors into is known. Then the step's program (every tensor,
  // the schedule, the buckets), built once, one plan and one binding.
  graph_.plan_ops(backend_);
  plan_and_bind(init);
  start_state();
  make_sync(comm);
  swap_passes_ = std::make_unique<SwapPasses>(backend_, bound_, program_.tensors);
  executor_ = std::make_unique<Executor>(program_.schedule, pass_runners(), *clock_);
  evaluation_ = std::make_unique<Evaluation>(backend_, graph_, bound_, program_, *clock_);
}

Trainer::~Trainer() {
  try {
    backend_.synchronize();
  } catch (const std::exception& e) {  // a destructor cannot throw; the device error is named
    fmt::print(stderr, "dlbench: while releasing the step's tensors: {}\n", e.what());
  }
}

StepTarget Trainer::step_target(Backend& backend, const TrainConfig& config) {
  StepTarget target{backend.async_input_copies(), config.loss_readback_steps, 0};
  target.rank = config.comm ? config.comm->rank() : 0;  // a local communicator's one rank is 0
  if (config.step.swap.kind == SwapPolicy::Kind::kAuto) {
    // The budget less what the device holds already (another trainer's buffers, a
    // communicator's staging, the workspace the layers' plans reserved).
    const size_t budget = *backend.allocator().budget();
    const size_t held = backend.allocator().stats().total_current;
    target.swap_room = budget - std::min(budget, held);
  }
  return target;
}

PassRunners Trainer::pass_runners() {
  loss_pass_ = std::make_unique<LossPass>(backend_, bound_, program_.ids, scaler_.get(),
                                          config_.mid_step_hook);
  PassRunners runners{&graph_, loss_pass_.get(), grad_sync_.get(), swap_passes_.get()};
  if (param_server_) runners.sync = param_server_.get();
  if (config_.compute_slowdown != 1) {
    slowed_layers_ = std::make_unique<SlowedPasses>(graph_, config_.compute_slowdown);
    slowed_loss_ = std::make_unique<SlowedPasses>(*loss_pass_, config_.compute_slowdown);
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
  require(backend_, graph_);
  batch_ = graph_.shape(graph_.output())[0];
  // fp16's range loses small gradients without loss scaling; bf16 has float's and needs none.
  if (scaled()) LossScaler::check(config_.loss_scaling);
}

void Trainer::require(const Backend& backend, const Graph& graph) {
  graph.require(backend);  // the model's ops first, then the loss's and the optimizer's
  LossPass::require(backend, graph);
  Optimizer::require(backend, graph.policy(), loss_scaled(graph.policy()));
}

bool Trainer::scaled() const { return loss_scaled(graph_.policy()); }

// Once bound: the state's first values, and the input slots.
void Trainer::start_state() {
  const StepTensorIds& ids = program_.ids;
  const int64_t first_step = 0;
  backend_.copy_from_host(&first_step, bound_.tensor(ids.step_counter));
  if (scaled()) {
    scaler_ = std::make_unique<LossScaler>(backend_, config_.loss_scaling, bound_, ids.gradients,
                                           ids.loss_scale);
  }
  optimizer_ = std::make_unique<Optimizer>(backend_, graph_, bound_, ids.momentum, config_.sgd,
                                           scaler_.get());
  inputs_ = std::make_unique<InputSlots>(backend_, bound_, program_);
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

void Trainer::plan_and_bind(Rng& init) {
  program_ = build_step(graph_, config_.step, step_target(backend_, config_));
  // Against the step as it would be without swapping: its host copies are not device bytes.
  naive_plan_bytes_ = naive_plan(program_.schedule, program_.tensors).device_bytes();
  memory_plan_ = plan_step(program_);
  bound_ = graph_.bind(backend_, init, memory_plan_, program_.tensors);
  if (const std::vector<std::string> races =
          check_swaps(program_.schedule, program_.tensors, memory_plan_);
      !races.empty()) {
    throw std::logic_error("the swapped step's copies race its passes: " + races.front());
  }
}

void Trainer::make_sync(Communicator& comm) {
  std::vector<Tensor> slots;
  for (int id : program_.ids.stale_slots) slots.push_back(bound_.tensor(id));
  const Tensor meeting = program_.ids.meeting >= 0 ? bound_.tensor(program_.ids.meeting) : Tensor();
  grad_sync_ = std::make_unique<GradSync>(graph_, bound_, program_.schedule, comm, backend_,
                                          *optimizer_, std::move(slots), meeting);
  if (config_.step.async()) {
    param_server_ = std::make_unique<ParamServer>(graph_, bound_, backend_, comm, *optimizer_,
                                                  program_.ids.async);
  }
}

void Trainer::load_batch(const float* images, const int64_t* labels) {
  inputs_->load(images, labels, tracer_);
}

void Trainer::load_encoded_batch(const std::vector<EncodedImage>& images,
                                 const ImageNormalization& norm, const int64_t* labels) {
  inputs_->load_encoded(images, norm, labels, tracer_);
}

std::string Trainer::image_decoder() const { return inputs_->decoder_name(); }

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
  Tensor& step_counter = bound_.tensor(program_.ids.step_counter);
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

void Trainer::step() {
  static const std::string kStep = "step";
  // The first step runs op by op: it makes the plans, workspaces and library state that a
  // capture must find already made.
  constexpr uint64_t kEagerSteps = 1;
  if (tracer_) tracer_->begin_step(static_cast<int64_t>(step_));
  {
    TraceScope step_scope(tracer_, kStep, kStepCategory, Lane::kHost);
    if (config_.step.capture && step_ >= kEagerSteps) {
      captured_.replay(inputs_->current(), [this] { run_step_work(nullptr); });
    } else {
      run_step_work(tracer_);
    }
  }
  ++step_;
  // Outside the captured work: the loss's place in the history changes every step.
  Tensor slot = bound_.tensor(program_.ids.loss_history).slice_flat(unread_++, 1);
  backend_.copy(bound_.tensor(program_.ids.loss), slot);
  inputs_->mark_read();
  if (unread_ == config_.loss_readback_steps) read_back_losses();
}

void Trainer::read_back_losses() {
  static const std::string kCopy = "loss to host";
  if (unread_ == 0) return;
  const Tensor unread = bound_.tensor(program_.ids.loss_history).slice_flat(0, unread_);
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
  const int64_t correct = evaluation_->count_correct(count, static_cast<int64_t>(step_));
  inputs_->mark_read();  // after the last read of the slot
  return correct;
}

void Trainer::broadcast_state(bool buffers_only) {
  broadcast_model_state(graph_, backend_, *config_.comm, *host_, buffers_only);
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
  return parameters_checksum(graph_, backend_);
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

RunStats Trainer::run(int64_t warmup, int64_t steps,
                      std::function<void(int64_t epoch, int64_t step)> load) {
  LoopResult r = train(TrainingLoop{warmup, steps, 1, {}, std::move(load), {}});
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
