#include "runtime/overlap/param_server.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "runtime/backend/cpu/parallel.h"
#include "runtime/core/error.h"
#include "runtime/overlap/sync_schedule.h"

namespace dlb {

namespace {

constexpr int kGradientTag = 7301, kWeightsTag = 7302;
const std::string kPullName = "pull weights", kPushName = "push gradients",
                  kServeName = "serve pushes";

}  // namespace

ParamServer::ParamServer(const Graph& graph, const BoundStep& step, Backend& backend,
                         Communicator& comm, const Optimizer& optimizer,
                         const AsyncTensors& tensors)
    : graph_(graph), step_(step), backend_(backend), comm_(comm), optimizer_(optimizer) {
  const Tensor& flat = step.tensor(graph.flat_gradient_id());
  if (flat.dtype() != DType::kF32 || graph.policy().master_weights != DType::kF32 ||
      graph.policy().compute_weights != DType::kF32) {
    throw std::logic_error(
        "a parameter server over 16-bit weights or gradients (StepSpec::validate refuses it)");
  }
  numel_ = flat.numel();
  const bool server = comm.rank() == 0;
  const auto ranks = static_cast<size_t>(comm.size());
  if (tensors.grads < 0 || (tensors.master >= 0) != server || (tensors.momentum >= 0) != server ||
      (tensors.reply >= 0) == server || tensors.replies.size() != (server ? ranks : 0)) {
    throw std::logic_error("a parameter server given another rank's host tensors");
  }
  // A host copy of `elements` floats, zeroed. A reply ends with the epoch's word: 1 when the
  // epoch is done, 0 when not.
  auto host = [&](int id, int64_t elements) {
    Tensor t = step.tensor(id);
    if (t.dtype() != DType::kF32 || t.numel() != elements ||
        !is_host_memory(t.buffer()->category())) {
      throw std::logic_error("a parameter server's host tensor of another shape or place");
    }
    std::fill_n(t.data<float>(), elements, 0.f);
    return t;
  };
  grads_ = host(tensors.grads, numel_);
  if (!server) {
    weights_ = host(tensors.reply, numel_ + 1);
    return;
  }
  master_ = host(tensors.master, numel_ + 1);
  momentum_ = host(tensors.momentum, numel_);
  for (size_t r = 0; r < ranks; ++r) {
    replies_.push_back(r == 0 ? Tensor() : host(tensors.replies[r], numel_ + 1));
  }
  sending_.resize(ranks);
  received_.assign(ranks, 0);
  version_sent_.assign(ranks, 0);
  stopped_.assign(ranks, false);
  heard_.assign(ranks, std::chrono::steady_clock::now());
}

ParamServer::~ParamServer() = default;

void ParamServer::run_pass(const Step& step, const LayerContext* ctx) {
  (void)ctx;
  switch (sync_pass_of(step)) {
    case SyncPass::kPull:
      return pull();
    case SyncPass::kPush:
      return push();
    case SyncPass::kProgress:
      if (comm_.rank() == 0) return serve();
      if (send_) send_->test();
      if (recv_) recv_->test();
      return;
    default:
      throw InvalidArgument(
          fmt::format("asynchronous SGD has no {} pass", sync_pass_name(sync_pass_of(step))));
  }
}

const std::string& ParamServer::label(const Step& step) const {
  switch (sync_pass_of(step)) {
    case SyncPass::kPull:
      return kPullName;
    case SyncPass::kPush:
      return kPushName;
    default:
      return kServeName;
  }
}

bool ParamServer::traced(const Step& step) const {
  const SyncPass p = sync_pass_of(step);
  return p == SyncPass::kPull || p == SyncPass::kPush;
}

void ParamServer::store_weights(Tensor& flat) const {
  const auto& offsets = graph_.grad_offsets();
  const auto& params = graph_.flat_params();
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& value = step_.tensor(params[i].value);
    backend_.copy_to_host(value, flat.data<float>() + offsets[i]);
  }
}

void ParamServer::load_weights(const Tensor& flat) {
  const auto& offsets = graph_.grad_offsets();
  const auto& params = graph_.flat_params();
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor& value = step_.tensor(params[i].value);
    backend_.copy_from_host(flat.data<float>() + offsets[i], value);
  }
}

void ParamServer::pull() {
  if (comm_.rank() == 0) {
    if (!started_) store_weights(master_);  // the broadcast weights, every rank's
    started_ = true;
    load_weights(master_);
    pulled_version_ = version_;
    return;
  }
  if (!recv_) return;  // the first step, after a flush, or taken by epoch_done
  take_reply();
}

void ParamServer::take_reply() {
  recv_->wait();
  recv_.reset();
  load_weights(weights_);
  told_done_ = weights_.data<float>()[numel_] != 0.f;
}

void ParamServer::start_epoch(int64_t pushes) {
  epoch_target_ = pushes;
  epoch_pushes_ = 0;
  told_done_ = false;
  std::fill(stopped_.begin(), stopped_.end(), false);
  std::fill(heard_.begin(), heard_.end(), std::chrono::steady_clock::now());
}

bool ParamServer::epoch_done() {
  if (comm_.rank() == 0) return epoch_pushes_ >= epoch_target_;
  if (recv_) take_reply();
  return told_done_;
}

void ParamServer::apply(const Tensor& grad, int64_t staleness) {
  // SGD with momentum as the CPU kernel computes it (runtime/backend/cpu/sgd.cpp), over the same
  // thread pool: each element alone, so the result does not depend on the threads.
  const SgdConfig& c = optimizer_.config();
  const float lr = c.lr, momentum = c.momentum, decay = c.weight_decay;
  const float* g = grad.data<float>();
  float* w = master_.data<float>();
  float* v = momentum_.data<float>();
  parallel_blocks(numel_, kParallelElements, [=](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float d = g[i] + decay * w[i];
      v[i] = momentum * v[i] + d;
      w[i] -= lr * v[i];
    }
  });
  ++version_;
  ++epoch_pushes_;
  staleness_.push_back(staleness);
}

void ParamServer::push() {
  ++pushes_;
  ++pushes_since_flush_;
  const Tensor& flat = step_.tensor(graph_.flat_gradient_id());
  if (comm_.rank() == 0) {
    backend_.copy_to_host(flat, grads_.data<float>());
    apply(grads_, version_ - pulled_version_);
    serve();
    return;
  }
  if (send_) send_->wait();  // served already: its reply came back before this step
  backend_.copy_to_host(flat, grads_.data<float>());
  send_ = comm_.send_async(grads_, 0, kGradientTag);
  recv_ = comm_.recv_async(weights_, 0, kWeightsTag);
}

void ParamServer::serve() {
  // A round at most: as many pushes as there are other ranks, so that rank 0's own step goes on
  // however fast the others push (each has one push in flight at most, and may push again once
  // served).
  for (int served = 0; served < comm_.size() - 1; ++served) {
    const std::optional<int> from = comm_.probe(kGradientTag);
    if (!from) break;
    serve_one(*from);
  }
  check_silence();
}

bool ParamServer::owes_push(size_t r) const {
  return epoch_target_ > 0 ? !stopped_[r] : received_[r] < pushes_;
}

void ParamServer::check_silence() const {
  const double timeout = comm_.timeout_seconds();
  const auto now = std::chrono::steady_clock::now();
  for (size_t r = 1; r < heard_.size(); ++r) {
    if (!owes_push(r)) continue;
    const double silent = std::chrono::duration<double>(now - heard_[r]).count();
    if (silent > timeout) {
      throw CommError(fmt::format(
          "asynchronous SGD: rank {} has pushed no gradients for {:.1f} s, more than the "
          "communicator's timeout of {} s (--comm-timeout): it stopped or died",
          r, silent, timeout));
    }
  }
}

void ParamServer::serve_one(int from) {
  const auto r = static_cast<size_t>(from);
  Tensor& reply = replies_.at(r);
  // The reply buffer is free once its last message has gone.
  if (sending_[r]) sending_[r]->wait();
  // A rank that died leaves this wait at the communicator's timeout, as a CommError.
  comm_.recv_async(reply, from, kGradientTag)->wait();
  apply(reply, version_ - version_sent_[r]);
  std::copy_n(master_.data<float>(), numel_, reply.data<float>());
  const bool done = epoch_target_ > 0 && epoch_pushes_ >= epoch_target_;
  reply.data<float>()[numel_] = done ? 1.f : 0.f;
  if (done) stopped_[r] = true;
  sending_[r] = comm_.send_async(reply, from, kWeightsTag);
  version_sent_[r] = version_;
  ++received_[r];
  heard_[r] = std::chrono::steady_clock::now();
}

void ParamServer::flush() {
  if (pushes_since_flush_ == 0) return;
  pushes_since_flush_ = 0;
  if (comm_.rank() == 0) {
    // In an epoch, every rank pushes until a reply tells it the epoch is done; otherwise every
    // rank pushes once a step, as rank 0 does.
    auto outstanding = [&] {
      for (size_t r = 1; r < received_.size(); ++r) {
        if (owes_push(r)) return true;
      }
      return false;
    };
    // Each rank's pushes in turn: a rank has one push outstanding at most, and a wait for it
    // ends at the communicator's timeout (CommError) where the rank has died.
    while (outstanding()) {
      for (size_t r = 1; r < received_.size(); ++r) {
        if (owes_push(r)) serve_one(static_cast<int>(r));
      }
    }
    for (auto& s : sending_) {
      if (s) s->wait();
      s.reset();
    }
  } else {
    if (recv_) take_reply();
    if (send_) send_->wait();
    send_.reset();
  }
  Tensor& weights = comm_.rank() == 0 ? master_ : weights_;
  comm_.broadcast(weights, 0);  // with the word after them: every rank's is the same
  load_weights(weights);
  epoch_target_ = 0;  // until the next start_epoch
  if (comm_.rank() == 0) {
    // The other ranks' next gradients are computed on these weights, from now.
    for (int64_t& v : version_sent_) v = version_;
    std::fill(heard_.begin(), heard_.end(), std::chrono::steady_clock::now());
  }
}

}  // namespace dlb
