#include "runtime/overlap/grad_sync.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "runtime/core/error.h"

namespace dlb {

namespace {
constexpr double kFirstBucketMb = 1.0;  // small, so the first all-reduce starts early
const std::string kUpdateName = "sgd bucket";
}  // namespace

GradSync::GradSync(Graph& graph, Communicator& comm, Backend& backend, OverlapStrategy strategy,
                   double bucket_mb, const SgdConfig& sgd, std::vector<Param*> params,
                   std::vector<Tensor*> momentum)
    : graph_(graph),
      comm_(comm),
      backend_(backend),
      strategy_(strategy),
      sgd_(sgd),
      params_(std::move(params)),
      momentum_(std::move(momentum)) {
  const auto& nodes = graph.nodes();
  std::map<const Param*, size_t> index;
  for (size_t i = 0; i < params_.size(); ++i) index[params_[i]] = i;
  node_params_.resize(nodes.size());
  node_buckets_.resize(nodes.size());
  param_bucket_.assign(params_.size(), 0);
  const float* flat = graph.flat_gradients().data<float>();
  // Walk the flat buffer's order: last layer first.
  Bucket current;
  double cap_mb = std::min(kFirstBucketMb, bucket_mb);
  for (size_t n = nodes.size(); n-- > 1;) {
    for (Param* p : nodes[n].layer->params()) {
      const size_t i = index.at(p);
      node_params_[n].push_back(i);
      const int64_t offset = p->grad.data<float>() - flat;
      if (current.count == 0) current.begin = offset;
      if (offset != current.begin + current.count) {
        throw InvalidArgument("gradients are not contiguous in reverse layer order");
      }
      current.count += p->grad.numel();
      current.params.push_back(i);
      if (current.count * 4.0 >= cap_mb * 1024 * 1024) {
        buckets_.push_back(std::move(current));
        current = Bucket{};
        cap_mb = bucket_mb;
      }
    }
  }
  if (current.count > 0) buckets_.push_back(std::move(current));
  for (size_t b = 0; b < buckets_.size(); ++b) {
    buckets_[b].ready_needed = static_cast<int64_t>(buckets_[b].params.size());
    for (size_t i : buckets_[b].params) param_bucket_[i] = b;
  }
  for (size_t n = 1; n < nodes.size(); ++n) {
    for (size_t i : node_params_[n]) {
      auto& nb = node_buckets_[n];
      if (std::find(nb.begin(), nb.end(), param_bucket_[i]) == nb.end())
        nb.push_back(param_bucket_[i]);
    }
  }
}

void GradSync::launch(Bucket& b) {
  Tensor slice = graph_.flat_gradients().slice_flat(b.begin, b.count);
  b.launched_us = tracer_ ? tracer_->now_us() : 0;  // also just before the window: see record
  // It starts after the work queued so far on the backend's stream: the bucket's gradients.
  b.handle = comm_.allreduce_async(slice, ReduceOp::kAverage, backend_.stream());
}

void GradSync::complete(Bucket& b) {
  if (b.reduced) return;
  if (b.handle) {
    // Work queued on the backend's stream from now on (the bucket's update) runs after the
    // reduction: on the host this waits; on a GPU the stream waits on the reduction's event and
    // the host goes on.
    b.handle->order_before(backend_.stream());
    finishing_.push_back({std::move(b.handle), b.launched_us, b.count});
  }
  b.reduced = true;
  record_finished();
}

void GradSync::record_finished() {
  static const std::string kName = "allreduce";
  auto finished = [&](Finishing& f) {
    if (!f.handle->test()) return false;
    if (!tracer_) return true;
    // The span ends when the reduction finished, not when this step got round to noticing. With
    // `forward`, reductions cross step boundaries: one launched before the window (or finished
    // after it) counts with its part inside the window, so every traced step has one step's
    // worth of communication.
    const double end = tracer_->to_us(f.handle->completed_at());
    if (tracer_->overlaps(f.launched_us, end)) {
      tracer_->record_clipped(Span{kName, "allreduce", Lane::kComm, 0, f.launched_us,
                                   std::max(end - f.launched_us, 0.0), f.count * 4.0});
    }
    return true;
  };
  finishing_.erase(std::remove_if(finishing_.begin(), finishing_.end(), finished),
                   finishing_.end());
}

void GradSync::update(Bucket& b) {
  if (b.updated) return;
  complete(b);
  TraceScope scope(tracer_, kUpdateName, "optimizer");
  for (size_t i : b.params)
    backend_.sgd_update(sgd_, params_[i]->grad, *momentum_[i], params_[i]->value);
  b.updated = true;
}

void GradSync::on_weights_ready(int node) {
  for (size_t i : node_params_[node]) {
    Bucket& b = buckets_[param_bucket_[i]];
    if (++b.ready == b.ready_needed && distributed() && strategy_ != OverlapStrategy::kNone) {
      launch(b);
    }
  }
}

void GradSync::after_backward_node(int node) {
  if (!node_params_[node].empty()) on_weights_ready(node);
  poll();
}

void GradSync::begin_backward() {
  for (Bucket& b : buckets_) {
    b.ready = 0;
    b.reduced = b.updated = false;
  }
}

void GradSync::poll() {
  for (Bucket& b : buckets_) reduced_now(b);
  record_finished();
}

bool GradSync::reduced_now(Bucket& b) {
  if (!b.reduced && b.handle && b.handle->test()) complete(b);
  return b.reduced;
}

void GradSync::before_forward(int node) {
  for (size_t i : node_buckets_[node]) {
    Bucket& wanted = buckets_[i];
    // While this layer's bucket is still in flight, apply the updates that are ready (in bucket
    // order): the wait for the front layers' bucket, reduced last, then hides the other updates,
    // as the backward strategy's update loop hides it.
    while (!wanted.updated && !reduced_now(wanted)) {
      auto ready = std::find_if(buckets_.begin(), buckets_.end(),
                                [&](Bucket& b) { return !b.updated && reduced_now(b); });
      if (ready == buckets_.end()) break;
      update(*ready);
    }
    update(wanted);
  }
}

void GradSync::after_backward() {
  if (distributed() && strategy_ == OverlapStrategy::kNone) {
    // One all-reduce of the whole flat buffer, timed as one bucket spanning everything.
    Bucket all;
    all.begin = 0;
    all.count = graph_.flat_gradients().numel();
    all.reduced = false;
    launch(all);
    complete(all);
    for (Bucket& b : buckets_) b.reduced = true;
  }
  if (strategy_ != OverlapStrategy::kForward || !distributed()) {
    for (Bucket& b : buckets_) update(b);
  }
  // Forward: updates happen in before_forward of the next step, or in flush().
}

void GradSync::flush() {
  for (Bucket& b : buckets_) update(b);
  for (Finishing& f : finishing_) f.handle->wait();
  record_finished();
}

}  // namespace dlb
