#include "runtime/train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>

#include "runtime/core/error.h"
#include "runtime/core/hash.h"

namespace dlb {

double RunStats::throughput() const {
  return timed_seconds > 0 ? static_cast<double>(images_per_step * timed_steps) / timed_seconds
                           : 0.0;
}

Trainer::Trainer(Backend& backend, Graph& graph, const TrainConfig& config)
    : backend_(backend), graph_(graph), config_(config) {
  if (!graph.is_setup()) throw InvalidArgument("Trainer needs a graph that is set up");
  for (Op op : {Op::kConv, Op::kMatmul, Op::kBatchNorm, Op::kRelu, Op::kPool, Op::kDropout,
                Op::kAdd, Op::kSoftmaxCrossEntropy, Op::kSgd}) {
    backend.require(op, config.precision);
  }
  const Shape& out = graph.shape(graph.output());
  if (out.rank() != 2) {
    throw InvalidArgument(fmt::format("the model's output {} is not [batch, classes]", out.str()));
  }
  batch_ = out[0];
  classes_ = out[1];
  labels_ = backend.empty({batch_}, DType::kI64, MemCategory::kData, "labels");
  probs_ = backend.empty(out, DType::kF32, MemCategory::kActivations, "softmax probabilities");
  loss_ = backend.empty({1}, DType::kF32, MemCategory::kActivations, "loss");
  for (const auto& np : graph.named_params()) {
    Tensor buf = backend.empty(np.param->value.shape(), DType::kF32, MemCategory::kOptimizerState,
                               "momentum of " + np.name);
    backend.fill(buf, 0.f);
    params_.push_back(np.param);
    momentum_.push_back(std::move(buf));
  }
  Communicator* comm = config.comm;
  if (!comm) {
    own_comm_ = make_communicator(CommKind::kLocal);
    comm = own_comm_.get();
  }
  std::vector<Tensor*> momentum;
  for (Tensor& m : momentum_) momentum.push_back(&m);
  grad_sync_ = std::make_unique<GradSync>(graph, *comm, backend, config.overlap, config.bucket_mb,
                                          config.sgd, params_, momentum);
  graph.set_observer(grad_sync_.get());
}

void Trainer::load_batch(const float* images, const int64_t* labels) {
  static const std::string kName = "batch to device";
  TraceScope scope(tracer_, kName, "copy", Lane::kCopy);
  backend_.copy_from_host(images, graph_.input_tensor());
  backend_.copy_from_host(labels, labels_);
}

float Trainer::train_step() {
  static const std::string kStep = "step", kLoss = "loss", kCopy = "loss to host";
  if (tracer_) tracer_->begin_step(static_cast<int64_t>(step_));
  // Dropout draws from the step and the rank: ranks with one seed would otherwise drop the same
  // units for the samples at the same place in their batches. Rank 0 draws as one rank does.
  const uint64_t rank = config_.comm ? static_cast<uint64_t>(config_.comm->rank()) : 0;
  const LayerContext ctx{backend_, true,
                         config_.seed * 1000003 + step_++ + rank * 0x9E3779B97F4A7C15ull, tracer_};
  TraceScope step_scope(tracer_, kStep, "step", Lane::kHost);
  graph_.forward(ctx);
  {
    TraceScope scope(tracer_, kLoss, "loss");
    backend_.softmax_cross_entropy(graph_.output_tensor(), labels_, probs_, loss_);
    backend_.softmax_cross_entropy_backward(probs_, labels_, graph_.output_grad());
  }
  if (config_.mid_step_hook) config_.mid_step_hook(static_cast<int64_t>(step_ - 1));
  grad_sync_->begin_backward();
  graph_.backward(ctx);
  grad_sync_->after_backward();
  float loss = 0;
  TraceScope scope(tracer_, kCopy, "copy", Lane::kCopy);
  backend_.copy_to_host(loss_, &loss);
  return loss;
}

int64_t Trainer::count_correct(int64_t count) {
  const LayerContext ctx{backend_, false, 0};
  graph_.forward(ctx);
  std::vector<float> logits(graph_.output_tensor().numel());
  std::vector<int64_t> labels(batch_);
  backend_.copy_to_host(graph_.output_tensor(), logits.data());
  backend_.copy_to_host(labels_, labels.data());
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
    Tensor host(backend_.allocator().allocate(t.bytes.size(), MemCategory::kComm, name), t.shape,
                t.dtype);
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
  for (Param* p : params_) {
    bytes.resize(p->value.bytes());
    backend_.copy_to_host(p->value, bytes.data());
    h = fnv1a(bytes.data(), bytes.size(), h);
  }
  return h;
}

bool Trainer::weights_identical_across_ranks() {
  if (!config_.comm) return true;
  const auto sums = config_.comm->allgather(weights_checksum());
  return std::all_of(sums.begin(), sums.end(), [&](uint64_t x) { return x == sums[0]; });
}

RunStats Trainer::run(int64_t warmup, int64_t steps) {
  using Clock = std::chrono::steady_clock;
  RunStats s;
  s.warmup_steps = warmup;
  s.timed_steps = steps;
  s.images_per_step = batch_;
  for (int64_t i = 0; i < warmup; ++i) s.losses.push_back(train_step());
  backend_.synchronize();
  const auto t0 = Clock::now();
  auto prev = t0;
  for (int64_t i = 0; i < steps; ++i) {
    s.losses.push_back(train_step());  // reading the loss synchronises the device
    const auto now = Clock::now();
    s.step_seconds.push_back(std::chrono::duration<double>(now - prev).count());
    prev = now;
  }
  // The trace window ends with the last step: reductions still in flight count up to here.
  if (tracer_) tracer_->end_window();
  flush();  // the last step's deferred updates belong to the timed work
  backend_.synchronize();
  s.timed_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return s;
}

}  // namespace dlb
