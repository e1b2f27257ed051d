#include "runtime/overlap/grad_sync.h"

#include <fmt/format.h>

#include <algorithm>

#include "runtime/core/error.h"
#include "runtime/overlap/sync_schedule.h"

namespace dlb {

namespace {
const std::string kUpdateName = "sgd bucket";
}  // namespace

GradSync::GradSync(const Graph& graph, const BoundStep& step, const Schedule& schedule,
                   Communicator& comm, Backend& backend, Optimizer& optimizer,
                   std::vector<Tensor> stale_slots, Tensor meeting)
    : flat_(step.tensor(graph.flat_gradient_id())),
      comm_(comm),
      backend_(backend),
      optimizer_(optimizer),
      plan_(buckets_of(schedule, graph)),
      state_(plan_.buckets.size()),
      meeting_token_(std::move(meeting)),
      slots_(std::move(stale_slots)),
      slot_state_(slots_.size()),
      slot_filled_(slots_.size(), false) {
  if (optimizer.size() != graph.flat_params().size()) {
    throw InvalidArgument(fmt::format("the graph has {} parameters, the optimizer {}",
                                      graph.flat_params().size(), optimizer.size()));
  }
  for (const ParamIds& p : graph.flat_params()) {
    all_values_ += graph.tensor_infos()[p.grad].shape.numel();
  }
  if (meeting_token_.defined()) backend_.fill(meeting_token_, 0);  // what the ranks average
}

std::unique_ptr<CommHandle> GradSync::launch(int bucket, Tensor what, Launch& launched) {
  // Also just before the window: see record_finished.
  launched.traced = tracer_ && tracer_->wants_edge_work();
  launched.step = tracer_ ? tracer_->step() : 0;
  launched.bucket = bucket;
  launched.host = launched.traced ? tracer_->host_mark() : Mark{};
  // It starts after the work queued so far on the backend's stream: the bucket's gradients.
  return comm_.allreduce_async(what, ReduceOp::kAverage, backend_.stream());
}

void GradSync::begin_step(int64_t index) {
  next_step_ = index + 1;
  if (slots_.empty()) return;
  slot_ = static_cast<size_t>(stale_slot(index, static_cast<int64_t>(slots_.size())));
}

void GradSync::run_pass(const Step& step, const LayerContext* ctx) {
  (void)ctx;
  switch (sync_pass_of(step)) {
    case SyncPass::kAllReduce:
      if (step.arg == kMeeting) return meet();
      return step.arg == kStaleSlot ? all_reduce_slot() : all_reduce(step.arg);
    case SyncPass::kWait:
      if (step.arg == kStaleSlot) return complete(slot_state_.at(slot_), all_values_);
      if (step.arg == kMeeting) return complete(meeting_, 0);
      return wait(step.arg);
    case SyncPass::kStash:
      return stash();
    case SyncPass::kUpdateStale:
      return update_stale();
    case SyncPass::kPull:
    case SyncPass::kPush:
      throw InvalidArgument("a pull or push pass is the parameter server's, not GradSync's");
    case SyncPass::kUpdate:
      return update(step.arg, false);
    case SyncPass::kUpdateCarried:
      return update(step.arg, true);
    case SyncPass::kProgress:
      return poll();
  }
}

const std::string& GradSync::label(const Step& step) const {
  static const std::string kBucket = "bucket", kInFlight = "reductions in flight";
  switch (sync_pass_of(step)) {
    case SyncPass::kUpdate:
    case SyncPass::kUpdateCarried:
    case SyncPass::kUpdateStale:
      return kUpdateName;
    case SyncPass::kProgress:
      return kInFlight;
    default:
      return kBucket;
  }
}

bool GradSync::traced(const Step& step) const {
  const SyncPass p = sync_pass_of(step);
  return p == SyncPass::kUpdate || p == SyncPass::kStash ||
         ((p == SyncPass::kUpdateCarried || p == SyncPass::kUpdateStale) && !skipped_);
}

void GradSync::all_reduce(int bucket) {
  if (!distributed()) return;
  State& s = bucket < 0 ? whole_ : state_.at(bucket);
  if (!s.reduced) {
    throw InvalidArgument(fmt::format(
        "the schedule reduces bucket {} again before waiting for its last reduction", bucket));
  }
  if (bucket < 0) {
    s.handle = launch(kEveryBucket, flat_, s.launched);
    for (State& each : state_) each.pending = true;
  } else {
    const Bucket& b = plan_.buckets.at(bucket);
    s.handle = launch(bucket, flat_.slice_flat(b.begin, b.count), s.launched);
  }
  s.reduced = false;
  s.pending = true;
}

void GradSync::meet() {
  if (!distributed()) return;
  if (!meeting_token_.defined()) {
    throw InvalidArgument("the schedule has the ranks meet, and GradSync was given no token");
  }
  if (!meeting_.reduced) {
    throw InvalidArgument("the schedule has the ranks meet again before waiting for the last");
  }
  meeting_.handle = launch(kMeetingBucket, meeting_token_, meeting_.launched);
  meeting_.reduced = false;
}

void GradSync::wait(int bucket) {
  if (bucket >= 0) return complete(state_.at(bucket), plan_.buckets.at(bucket).values);
  // The whole buffer, timed as one bucket spanning everything.
  int64_t values = 0;
  for (const Bucket& b : plan_.buckets) values += b.values;
  complete(whole_, values);
}

void GradSync::finishing(std::unique_ptr<CommHandle> handle, const Launch& launched,
                         int64_t values) {
  finishing_.push_back({std::move(handle), launched, values});
  record_finished();
}

void GradSync::complete(State& s, int64_t values) {
  if (s.reduced) return;
  // Work queued on the backend's stream from now on (the bucket's update) runs after the
  // reduction: on the host this waits; on a GPU the stream waits on the reduction's event and
  // the host goes on.
  s.handle->order_before(backend_.stream());
  s.reduced = true;
  finishing(std::move(s.handle), s.launched, values);
}

void GradSync::poll() {
  for (size_t b = 0; b < state_.size(); ++b) {
    State& s = state_[b];
    if (!s.reduced && s.handle->test()) complete(s, plan_.buckets[b].values);
  }
  for (State& s : slot_state_) {
    if (!s.reduced && s.handle->test()) complete(s, all_values_);
  }
  record_finished();
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
    Span span{kName, "allreduce", Lane::kComm, 0, 0, 0, f.values * element_bytes};
    span.bucket = f.launched.bucket;
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
  const Bucket& bucket = plan_.buckets[b];
  optimizer_.update_range(bucket.first_param, bucket.num_params);
  state_[b].pending = false;
}

void GradSync::update(int bucket, bool carried) {
  State& s = state_.at(bucket);
  skipped_ = carried && !s.pending;
  if (skipped_) return;  // nothing reduced since the last update (step 0, a flush)
  if (!s.reduced || !whole_.reduced) {
    throw InvalidArgument(
        fmt::format("the schedule updates bucket {} before waiting for its all-reduce", bucket));
  }
  apply(static_cast<size_t>(bucket));
}

void GradSync::stash() {
  if (!slot_state_.at(slot_).reduced) {
    throw InvalidArgument(fmt::format(
        "the schedule stashes into stale slot {} before waiting for its reduction", slot_));
  }
  Tensor& slot = slots_[slot_];
  backend_.copy(flat_, slot);
  slot_filled_[slot_] = true;
}

void GradSync::apply_slot(size_t slot) {
  optimizer_.update_range_from(0, optimizer_.size(), slots_[slot]);
  slot_filled_[slot] = false;
}

void GradSync::update_stale() {
  skipped_ = !slot_filled_.at(slot_);
  if (skipped_) return;  // the first K steps: no gradients of K steps before
  if (!slot_state_[slot_].reduced) {
    throw InvalidArgument(fmt::format(
        "the schedule updates from stale slot {} before waiting for its reduction", slot_));
  }
  apply_slot(slot_);
}

void GradSync::all_reduce_slot() {
  State& s = slot_state_.at(slot_);
  if (distributed()) {
    s.handle = launch(kEveryBucket, slots_[slot_], s.launched);
    s.reduced = false;
  }
}

void GradSync::flush() {
  // The slots' gradients, oldest first: the next step's slot holds the oldest.
  const auto k = static_cast<int64_t>(slots_.size());
  for (int64_t i = 0; i < k; ++i) {
    const auto j = static_cast<size_t>(stale_slot(next_step_ + i, k));
    complete(slot_state_[j], all_values_);
    if (slot_filled_[j]) apply_slot(j);
  }
  for (size_t b = 0; b < state_.size(); ++b) wait(static_cast<int>(b));
  wait(-1);
  complete(meeting_, 0);
  for (size_t b = 0; b < state_.size(); ++b)
    if (state_[b].pending) apply(b);
  for (Finishing& f : finishing_) f.handle->wait();
  record_finished();
}

}  // namespace dlb
