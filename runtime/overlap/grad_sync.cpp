#include "runtime/overlap/grad_sync.h"

#include <fmt/format.h>

#include <algorithm>

#include "runtime/core/error.h"

namespace dlb {

namespace {
const std::string kUpdateName = "sgd bucket";
}  // namespace

GradSync::GradSync(Tensor flat_gradients, Communicator& comm, Backend& backend,
                   Optimizer& optimizer, BucketPlan plan)
    : flat_(std::move(flat_gradients)),
      comm_(comm),
      backend_(backend),
      optimizer_(optimizer),
      plan_(std::move(plan)),
      state_(plan_.buckets.size()) {
  size_t params = 0;
  for (const Bucket& b : plan_.buckets) params += b.num_params;
  if (params != optimizer.size()) {
    throw InvalidArgument(fmt::format("the bucket plan covers {} parameters, the optimizer has {}",
                                      params, optimizer.size()));
  }
}

std::unique_ptr<CommHandle> GradSync::launch(int64_t begin, int64_t count, Launch& launched) {
  // Also just before the window: see record_finished.
  launched.traced = tracer_ && tracer_->wants_edge_work();
  launched.step = tracer_ ? tracer_->step() : 0;
  launched.host = launched.traced ? tracer_->host_mark() : Mark{};
  // It starts after the work queued so far on the backend's stream: the bucket's gradients.
  Tensor slice = flat_.slice_flat(begin, count);
  return comm_.allreduce_async(slice, ReduceOp::kAverage, backend_.stream());
}

void GradSync::all_reduce(int bucket) {
  if (!distributed()) return;
  if (bucket < 0) {
    // One all-reduce of the whole flat buffer, timed as one bucket spanning everything.
    Launch launched;
    auto handle = launch(0, flat_.numel(), launched);
    handle->order_before(backend_.stream());
    int64_t values = 0;
    for (const Bucket& b : plan_.buckets) values += b.values;
    finishing(std::move(handle), launched, values);
    for (State& s : state_) s.pending = true;
    return;
  }
  State& s = state_.at(bucket);
  const Bucket& b = plan_.buckets.at(bucket);
  s.handle = launch(b.begin, b.count, s.launched);
  s.reduced = false;
  s.pending = true;
}

void GradSync::finishing(std::unique_ptr<CommHandle> handle, const Launch& launched,
                         int64_t values) {
  finishing_.push_back({std::move(handle), launched, values});
  record_finished();
}

void GradSync::complete(size_t b) {
  State& s = state_[b];
  if (s.reduced) return;
  // Work queued on the backend's stream from now on (the bucket's update) runs after the
  // reduction: on the host this waits; on a GPU the stream waits on the reduction's event and
  // the host goes on.
  s.handle->order_before(backend_.stream());
  s.reduced = true;
  finishing(std::move(s.handle), s.launched, plan_.buckets[b].values);
}

bool GradSync::reduced_now(size_t b) {
  State& s = state_[b];
  if (!s.reduced && s.handle->test()) complete(b);
  return s.reduced;
}

void GradSync::record_finished() {
  static const std::string kName = "allreduce";
  const double element_bytes = static_cast<double>(dtype_size(flat_.dtype()));
  auto finished = [&](Finishing& f) {
    if (!f.handle->test()) return false;
    if (!tracer_ || !f.launched.traced) return true;
    // The span ends when the reduction finished, not when this step got round to noticing: on
    // a device, the communicator's own events around the collective; on the host, launch and
    // the time it was seen to finish. With `forward`, reductions cross step boundaries: one
    // launched before the window (or finished after it) counts with its part inside the window,
    // so every traced step has one step's worth of communication.
    const Span span{kName, "allreduce", Lane::kComm, 0, 0, 0, f.values * element_bytes};
    const auto marks = f.handle->device_marks();
    if (tracer_->on_device()) {
      // A device clock places only device marks; a host communicator's work has none.
      if (marks) tracer_->record_clipped(span, marks->first, marks->second, f.launched.step);
    } else {
      tracer_->record_clipped(span, f.launched.host, tracer_->host_mark(f.handle->completed_at()),
                              f.launched.step);
    }
    return true;
  };
  finishing_.erase(std::remove_if(finishing_.begin(), finishing_.end(), finished),
                   finishing_.end());
}

void GradSync::apply(size_t b) {
  // Loss scaling skips a step on any inf or NaN in any gradient: before the step's first update,
  // every bucket's reduction is ordered before the stream, not only this one's.
  if (optimizer_.reads_all_gradients_first() && optimizer_.at_step_start()) {
    for (size_t i = 0; i < state_.size(); ++i) complete(i);
  }
  complete(b);
  TraceScope scope(tracer_, kUpdateName, "optimizer");
  const Bucket& bucket = plan_.buckets[b];
  for (size_t i = bucket.first_param; i < bucket.first_param + bucket.num_params; ++i)
    optimizer_.update(i);
  state_[b].pending = false;
}

void GradSync::update(int bucket, bool from_previous_step) {
  const size_t wanted = static_cast<size_t>(bucket);
  if (!from_previous_step) {
    apply(wanted);
    return;
  }
  if (!state_.at(wanted).pending) return;  // nothing reduced since the last update (step 0)
  while (!reduced_now(wanted)) {
    size_t ready = 0;
    while (ready < state_.size() && !(state_[ready].pending && reduced_now(ready))) ++ready;
    if (ready == state_.size()) break;
    apply(ready);
  }
  apply(wanted);
}

void GradSync::poll() {
  for (size_t b = 0; b < state_.size(); ++b) reduced_now(b);
  record_finished();
}

void GradSync::flush() {
  for (size_t b = 0; b < state_.size(); ++b)
    if (state_[b].pending) apply(b);
  for (Finishing& f : finishing_) f.handle->wait();
  record_finished();
}

}  // namespace dlb
