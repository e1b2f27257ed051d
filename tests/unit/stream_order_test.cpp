// Step 4 of docs/cuda.md's ladder: the order of work between the compute stream and the
// communicator, checked through a recording seam. A RecordingBackend (the CPU backend's ops, with
// a non-null stream, so the trainer and the gradient sync take the device path) logs every
// gradient write; a RecordingCommunicator (two ranks whose all-reduce is the identity) logs each
// all-reduce with the stream it was ordered after, and each order_before with the stream made to
// wait. For every overlap strategy and a real model, the log must show:
//   - every all-reduce is ordered after the backend's stream (never after nothing), and starts
//     after every gradient it reduces has been written in this step;
//   - no gradient it reduces is written again before its reduction is ordered before the stream;
//   - every update reads only gradients whose reduction was ordered before the stream first.
// This is what the nccl communicator turns into events (record on the producer, the comm stream
// waits; record at the end, the consumer waits). The double checks order, never numerics. Its
// reductions are never seen finished by a progress pass (a test), so only a wait orders one, and
// a missing wait cannot hide behind a poll. The same holds for stale:K's slots and independent
// ranks' meeting.
//
// The same backend, with asynchronous input copies, checks the trainer's double-buffered input:
// every read of an input buffer waits for the copy that filled it, no copy overwrites a buffer
// before the compute that read it has run, and each batch's copy may run during the step before.
// And swapping's copies (--swap): no op between a copy and its wait touches the copy's bytes.
// The CUDA backend turns the same calls into events (SwapCopies, backend/cuda/staging.h).
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/delegating_backend.h"
#include "runtime/backend/device_queue.h"
#include "runtime/comm/communicator.h"
#include "runtime/core/error.h"
#include "runtime/nn/layers/elementwise.h"
#include "runtime/nn/layers/linear.h"
#include "runtime/train/trainer.h"
#include "workloads/data/dataset.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

struct Range {
  const char* begin;
  const char* end;
  bool overlaps(const Range& o) const { return begin < o.end && o.begin < end; }
  bool covers(const Range& o) const { return begin <= o.begin && o.end <= end; }
};
Range range_of(const Tensor& t) {
  const char* p = static_cast<const char*>(t.raw());
  return {p, p + t.bytes()};
}

struct Event {
  enum Kind {
    kWrite,
    kAllreduce,
    kOrderBefore,
    kUpdate,
    kRead,
    kCopyIn,
    kWaitInput,
    kCheck,
    kSwapOut,  // a swap's copy: its device-side range (read from for out, written for in)
    kSwapIn,
    kWaitCopy  // handle: the swap copy waited for
  } kind;
  Range range;
  const void* stream = nullptr;
  int handle = -1;  // an all-reduce's or an input copy's id
  // kCopyIn: the compute position it waits for (-1: none). A position is a log index: the
  // compute work logged before it has run.
  double at = -1;
};

struct Log {
  std::vector<Event> events;
  int next_handle = 0;
};

int stream_tag;  // the recording backend's "stream": any non-null address

// Marks are positions in the log; their device pointer is a tag, so "no mark" stays null.
class RecordingClock final : public Clock {
 public:
  explicit RecordingClock(const Log& log) : log_(log) {}
  double now_us() const override { return 0; }
  double from_steady(std::chrono::steady_clock::time_point) const override { return 0; }
  Mark mark() const override {
    return Mark{static_cast<double>(log_.events.size()),
                std::shared_ptr<void>(&stream_tag, [](void*) {})};
  }

 private:
  const Log& log_;
};

// The CPU backend's ops, logging the tensors each one writes (and where an input is read).
class RecordingBackend final : public DelegatingBackend {
 public:
  explicit RecordingBackend(Log& log, bool async_inputs = false)
      : log_(log), clock_(log), async_inputs_(async_inputs) {}
  std::string_view name() const override { return "recording"; }
  StreamRef stream() const override { return {&stream_tag}; }
  const Clock& clock() const override { return clock_; }

  // Input copies run "on a copy queue": logged with the position they wait for, done at once.
  bool async_input_copies() const override { return async_inputs_; }
  CopyMarks copy_in(const void* src, Tensor& dst, const Mark& free) override {
    const int id = log_.next_handle++;
    log_.events.push_back(
        {Event::kCopyIn, range_of(dst), nullptr, id, free.device ? free.us : -1.0});
    DelegatingBackend::copy_from_host(src, dst);
    const Mark end{static_cast<double>(id), std::shared_ptr<void>(&stream_tag, [](void*) {})};
    return {end, end};
  }
  void wait_for_input(const Mark& copied) override {
    log_.events.push_back({Event::kWaitInput, {}, nullptr, static_cast<int>(copied.us)});
  }
  // A swap's copies run "on a copy queue" too: logged with the device side's range, done at once
  // (memory_plan_test.cpp's LateCopies does them at the wait instead).
  CopyMarks swap_copy(const Tensor& src, Tensor& dst) override {
    const int id = log_.next_handle++;
    const bool out = dst.buffer()->category() == MemCategory::kHostSwap;
    log_.events.push_back(
        {out ? Event::kSwapOut : Event::kSwapIn, range_of(out ? src : dst), nullptr, id});
    DelegatingBackend::copy(src, dst);
    const Mark end{static_cast<double>(id), std::shared_ptr<void>(&stream_tag, [](void*) {})};
    return {end, end};
  }
  void wait_for_copy(const Mark& copied) override {
    log_.events.push_back({Event::kWaitCopy, {}, nullptr, static_cast<int>(copied.us)});
  }

  void copy_to_host(const Tensor& src, void* dst) override {
    r(src), DelegatingBackend::copy_to_host(src, dst);
  }
  void copy(const Tensor& src, Tensor& dst) override { w(dst), DelegatingBackend::copy(src, dst); }
  void fill(Tensor& t, float v) override { w(t), DelegatingBackend::fill(t, v); }
  void conv_forward(const ConvPlan& p, const Tensor& x, const Tensor& wt, Tensor& y) override {
    r(x), w(y), DelegatingBackend::conv_forward(p, x, wt, y);
  }
  void conv_backward_data(const ConvPlan& p, const Tensor& dy, const Tensor& wt,
                          Tensor& dx) override {
    r(dy), w(dx), DelegatingBackend::conv_backward_data(p, dy, wt, dx);
  }
  void batch_norm_train(const Tensor& x, const Tensor& g, const Tensor& b, Tensor& rm, Tensor& rv,
                        Tensor& sm, Tensor& si, Tensor& y, float mo, float eps) override {
    r(x), w(sm), w(si), w(y);
    DelegatingBackend::batch_norm_train(x, g, b, rm, rv, sm, si, y, mo, eps);
  }
  void relu_forward(const Tensor& x, Tensor& y) override {
    r(x), w(y), DelegatingBackend::relu_forward(x, y);
  }
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) override {
    r(y), r(dy), w(dx), DelegatingBackend::relu_backward(y, dy, dx);
  }
  void pool_forward(const PoolDesc& p, const Tensor& x, Tensor& y) override {
    r(x), w(y), DelegatingBackend::pool_forward(p, x, y);
  }
  void pool_backward(const PoolDesc& p, const Tensor& x, const Tensor& y, const Tensor& dy,
                     Tensor& dx) override {
    r(x), r(y), r(dy), w(dx), DelegatingBackend::pool_backward(p, x, y, dy, dx);
  }
  void add(const Tensor& a, const Tensor& b, Tensor& y) override {
    r(a), r(b), w(y), DelegatingBackend::add(a, b, y);
  }
  void conv_backward_filter(const ConvPlan& p, const Tensor& x, const Tensor& dy,
                            Tensor& dw) override {
    r(x), w(dw), DelegatingBackend::conv_backward_filter(p, x, dy, dw);
  }
  void bias_backward(const Tensor& dy, Tensor& db) override {
    w(db), DelegatingBackend::bias_backward(dy, db);
  }
  void matmul(Precision m, bool ta, bool tb, float alpha, const Tensor& a, const Tensor& b,
              float beta, Tensor& c) override {
    r(a), r(b), w(c), DelegatingBackend::matmul(m, ta, tb, alpha, a, b, beta, c);
  }
  void batch_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& g, const Tensor& sm,
                           const Tensor& si, Tensor& dx, Tensor& dg, Tensor& db) override {
    r(x), r(dy), r(sm), r(si), w(dx), w(dg), w(db);
    DelegatingBackend::batch_norm_backward(x, dy, g, sm, si, dx, dg, db);
  }
  void accumulate(const Tensor& x, Tensor& y) override {
    w(y), DelegatingBackend::accumulate(x, y);
  }
  void softmax_cross_entropy(const Tensor& z, const Tensor& l, Tensor& p, Tensor& loss) override {
    r(l), DelegatingBackend::softmax_cross_entropy(z, l, p, loss);
  }
  void softmax_cross_entropy_backward(const Tensor& p, const Tensor& l, Tensor& dz) override {
    r(l), DelegatingBackend::softmax_cross_entropy_backward(p, l, dz);
  }
  void sgd_update(const SgdConfig& c, const Tensor& g, Tensor& m, Tensor& p) override {
    log_.events.push_back({Event::kUpdate, range_of(g)});
    DelegatingBackend::sgd_update(c, g, m, p);
  }
  void sgd_update_unscaled(const SgdConfig& c, const Tensor& g, const Tensor& s, Tensor& m,
                           Tensor& p) override {
    log_.events.push_back({Event::kUpdate, range_of(g)});
    DelegatingBackend::sgd_update_unscaled(c, g, s, m, p);
  }
  void find_non_finite(const Tensor& g, Tensor& s) override {
    log_.events.push_back({Event::kCheck, range_of(g)});
    DelegatingBackend::find_non_finite(g, s);
  }

 private:
  void w(const Tensor& t) { log_.events.push_back({Event::kWrite, range_of(t)}); }
  // Reads are logged where an input or a swapped activation can be read: a convolution, a matrix
  // product, batch norm, ReLU, pooling, an addition and the loss.
  void r(const Tensor& t) { log_.events.push_back({Event::kRead, range_of(t)}); }
  Log& log_;
  RecordingClock clock_;
  bool async_inputs_;
};

class RecordingHandle final : public CommHandle {
 public:
  // `polled`: whether a test finds it finished (a progress pass then orders it before the
  // stream); otherwise only a wait does.
  RecordingHandle(Log& log, Range r, int id, bool polled = true)
      : log_(log), range_(r), id_(id), polled_(polled) {}
  bool test() override {
    if (!polled_ && !waited_) return false;
    stamp_completion();
    return true;
  }
  void wait() override { stamp_completion(); }
  void order_before(StreamRef consumer) override {
    stamp_completion();
    waited_ = true;
    log_.events.push_back({Event::kOrderBefore, range_, consumer.native, id_});
  }

 private:
  Log& log_;
  Range range_;
  int id_;
  bool polled_, waited_ = false;
};

// Two ranks with identical gradients: the average is the identity, so training is unchanged.
class RecordingCommunicator final : public Communicator {
 public:
  // `polled`: RecordingHandle's.
  explicit RecordingCommunicator(Log& log, bool polled = true) : log_(log), polled_(polled) {}
  std::string_view name() const override { return "recording"; }
  int rank() const override { return 0; }
  int size() const override { return 2; }
  void broadcast(Tensor&, int) override {}
  std::vector<uint64_t> allgather(uint64_t v) override { return {v, v}; }
  void barrier() override {}
  double max_across_ranks(double v) override { return v; }
  double sum_across_ranks(double v) override { return 2 * v; }
  double time_reference_allreduce(Tensor&, int) override { return 0; }
  std::string reference_name() const override { return "none"; }
  std::map<std::string, std::string> environment() const override { return {}; }

 protected:
  std::unique_ptr<CommHandle> start_allreduce(Tensor& buffer, ReduceOp,
                                              StreamRef producer) override {
    const int id = log_.next_handle++;
    log_.events.push_back({Event::kAllreduce, range_of(buffer), producer.native, id});
    return std::make_unique<RecordingHandle>(log_, range_of(buffer), id, polled_);
  }

 private:
  Log& log_;
  bool polled_;
};

// `grads`: every parameter's gradient. Each one inside an all-reduce must have been written
// since the previous all-reduce of it (in this step's backward), before this one starts.
void check_order(const Log& log, const std::vector<Range>& grads) {
  int allreduces = 0, updates = 0;
  for (size_t i = 0; i < log.events.size(); ++i) {
    const Event& e = log.events[i];
    if (e.kind == Event::kAllreduce) {
      ++allreduces;
      for (const Range& g : grads) {
        if (!e.range.covers(g)) continue;
        bool written = false;
        for (size_t j = i; j-- > 0;) {
          const Event& f = log.events[j];
          if (f.kind == Event::kAllreduce && f.range.overlaps(g)) break;  // the previous one
          if (f.kind == Event::kWrite && f.range.covers(g)) {
            written = true;
            break;
          }
        }
        EXPECT_TRUE(written) << "all-reduce " << e.handle
                             << " starts before a gradient it reduces is written";
      }
      EXPECT_EQ(e.stream, &stream_tag)
          << "all-reduce " << e.handle << " not ordered after the stream";
      // Its gradients were written before it, and none is written again until it is ordered
      // before the stream.
      bool ordered = false;
      for (size_t j = i + 1; j < log.events.size() && !ordered; ++j) {
        const Event& f = log.events[j];
        if (f.kind == Event::kOrderBefore && f.handle == e.handle) {
          EXPECT_EQ(f.stream, &stream_tag);
          ordered = true;
        } else if (f.kind == Event::kWrite && f.range.overlaps(e.range)) {
          ADD_FAILURE() << "a gradient of all-reduce " << e.handle
                        << " is written before the reduction is ordered before the stream";
        }
      }
      EXPECT_TRUE(ordered) << "all-reduce " << e.handle << " is never ordered before the stream";
    }
    if (e.kind == Event::kUpdate) {
      ++updates;
      // The latest all-reduce covering these gradients was ordered before the stream first.
      int latest = -1;
      bool ordered = false;
      for (size_t j = 0; j < i; ++j) {
        const Event& f = log.events[j];
        if (f.kind == Event::kAllreduce && f.range.covers(e.range))
          latest = f.handle, ordered = false;
        if (f.kind == Event::kOrderBefore && f.handle == latest) ordered = true;
      }
      EXPECT_GE(latest, 0) << "an update reads gradients no all-reduce covered";
      EXPECT_TRUE(ordered) << "an update runs before all-reduce " << latest
                           << " is ordered before it";
    }
  }
  EXPECT_GT(allreduces, 0);
  EXPECT_GT(updates, 0);
}

class StreamOrder : public ::testing::TestWithParam<OverlapStrategy> {};

TEST_P(StreamOrder, ReductionsFollowTheirGradientsAndPrecedeTheirUpdates) {
  Log log;
  RecordingBackend backend(log);
  RecordingCommunicator comm(log, false);  // only a wait orders a reduction
  Graph g = build_model("resnet18", ModelConfig{2, 32, 10, {}});
  Rng rng(1);
  g.declare_for(backend);
  TrainConfig tc;
  tc.comm = &comm;
  tc.step.overlap = GetParam();
  tc.step.bucket_mb = 2;  // several buckets
  Trainer t(backend, g, tc, rng);
  const Dataset d = make_synthetic(2, 3, 32, 10, 4);
  t.load_batch(d.images.data(), d.labels.data());
  log.events.clear();
  for (int s = 0; s < 3; ++s) t.step();
  t.flush();
  std::vector<Range> grads;
  for (const auto& np : g.named_params()) grads.push_back(range_of(np.param.grad));
  check_order(log, grads);
}

INSTANTIATE_TEST_SUITE_P(Strategies, StreamOrder,
                         ::testing::Values(OverlapStrategy::kNone, OverlapStrategy::kBackward,
                                           OverlapStrategy::kForward),
                         [](const auto& info) { return std::string(overlap_name(info.param)); });

// The sync modes whose waits are not a strategy's, through the same seam: stale:K's slot,
// reduced behind the next K steps and waited for K steps after its launch, then stashed into
// again; and independent ranks' meeting, waited for before the step's updates
// (runtime/overlap/sync_schedule.h). The lane check (runtime/nn/lane_order.h) proves the
// programs right under these rules; this shows that GradSync keeps them.
class SyncModeOrder : public ::testing::TestWithParam<SyncMode> {};

TEST_P(SyncModeOrder, EachReductionIsWaitedForBeforeItsBytesAreReadOrWritten) {
  Log log;
  RecordingBackend backend(log);
  // A reduction is never seen finished by a progress pass: only its wait orders it.
  RecordingCommunicator comm(log, false);
  Graph g = build_model("digits-cnn", ModelConfig{4, 8, 10, 0.f});
  Rng rng(1);
  g.declare_for(backend);
  TrainConfig tc;
  tc.comm = &comm;
  tc.step.sync = GetParam();
  Trainer t(backend, g, tc, rng);
  const Dataset d = make_synthetic(4, 1, 8, 10, 4);
  t.load_batch(d.images.data(), d.labels.data());
  log.events.clear();
  const int64_t k = GetParam().staleness;
  for (int64_t s = 0; s < k + 3; ++s) t.step();
  t.flush();
  const StepTensorIds& ids = t.program().ids;
  if (k > 0) {
    // Each slot: stashed into, reduced, waited for, read by the update, stashed into again.
    std::vector<Range> slots;
    for (int id : ids.stale_slots) slots.push_back(range_of(t.bound().tensor(id)));
    ASSERT_EQ(slots.size(), static_cast<size_t>(k));
    check_order(log, slots);
    return;
  }
  // The meeting: every update after the step's meeting has been ordered before the stream.
  const Range token = range_of(t.bound().tensor(ids.meeting));
  int meetings = 0, updates = 0, latest = -1;
  bool ordered = false;
  for (const Event& e : log.events) {
    if (e.kind == Event::kAllreduce) {
      EXPECT_TRUE(e.range.covers(token)) << "independent ranks reduce nothing but the token";
      EXPECT_EQ(e.stream, &stream_tag);
      latest = e.handle, ordered = false, ++meetings;
    }
    if (e.kind == Event::kOrderBefore && e.handle == latest) ordered = true;
    if (e.kind == Event::kUpdate) {
      ++updates;
      EXPECT_TRUE(ordered) << "an update before the ranks' meeting is ordered before it";
    }
  }
  EXPECT_EQ(meetings, 3);
  EXPECT_GT(updates, 0);
}

INSTANTIATE_TEST_SUITE_P(Modes, SyncModeOrder,
                         ::testing::Values(SyncMode{SyncMode::Kind::kStale, 1},
                                           SyncMode{SyncMode::Kind::kStale, 2},
                                           SyncMode{SyncMode::Kind::kStale, 3},
                                           SyncMode{SyncMode::Kind::kIndependent, 0}),
                         [](const auto& info) {
                           std::string name = sync_mode_name(info.param);
                           std::replace(name.begin(), name.end(), ':', '_');
                           return name;
                         });

// fp16's loss scaling decides a step's skip from every gradient: its check must come after every
// reduction of the step is ordered before the stream (not only the first-updated bucket's), and
// before the step's first update; in every strategy, with several buckets.
TEST_P(StreamOrder, LossScalingChecksEveryReducedGradientBeforeTheFirstUpdate) {
  Log log;
  RecordingBackend backend(log);
  RecordingCommunicator comm(log, false);  // only a wait orders a reduction
  Graph g = build_model("digits-cnn", ModelConfig{4, 8, 10, 0.f});
  Rng rng(1);
  g.declare_for(backend, PrecisionPolicy::for_precision(Precision::kFp16));
  TrainConfig tc;
  tc.comm = &comm;
  tc.step.overlap = GetParam();
  tc.step.bucket_mb = 0.01;  // several buckets of 16-bit gradients
  Trainer t(backend, g, tc, rng);
  ASSERT_GE(t.bucket_plan().buckets.size(), 3u);
  const Dataset d = make_synthetic(4, 1, 8, 10, 4);
  t.load_batch(d.images.data(), d.labels.data());
  log.events.clear();
  for (int s = 0; s < 3; ++s) t.step();
  t.flush();
  int checks = 0;
  std::vector<int> unordered;  // all-reduces launched and not yet ordered before the stream
  bool checked_since_updates = false;
  for (const Event& e : log.events) {
    if (e.kind == Event::kAllreduce) unordered.push_back(e.handle);
    if (e.kind == Event::kOrderBefore) {
      unordered.erase(std::remove(unordered.begin(), unordered.end(), e.handle), unordered.end());
    }
    if (e.kind == Event::kCheck) {
      ++checks;
      EXPECT_TRUE(unordered.empty()) << "the inf check runs before all-reduce " << unordered[0]
                                     << " is ordered before the stream";
      checked_since_updates = true;
    }
    if (e.kind == Event::kUpdate) {
      EXPECT_TRUE(checked_since_updates) << "an update before the step's inf check";
    }
    if (e.kind == Event::kAllreduce) checked_since_updates = false;
  }
  EXPECT_EQ(checks, 3);
}

// Every read of an input buffer waits for the latest copy into it; every copy into a buffer waits
// for a position after every earlier read of it. Returns how many copies may run while compute
// queued before them still runs (a read lies between the position they wait for and their issue).
int check_inputs(const Log& log) {
  int overlapping = 0;
  for (size_t i = 0; i < log.events.size(); ++i) {
    const Event& e = log.events[i];
    if (e.kind == Event::kRead) {
      int latest = -1;
      bool waited = false;
      for (size_t j = 0; j < i; ++j) {
        const Event& f = log.events[j];
        if (f.kind == Event::kCopyIn && f.range.overlaps(e.range))
          latest = f.handle, waited = false;
        if (f.kind == Event::kWaitInput && latest >= 0 && f.handle == latest) waited = true;
      }
      if (latest >= 0) {
        EXPECT_TRUE(waited) << "a read at " << i << " does not wait for input copy " << latest;
      }
    }
    if (e.kind == Event::kCopyIn) {
      bool overlaps = false;
      for (size_t j = 0; j < i; ++j) {
        const Event& f = log.events[j];
        if (f.kind != Event::kRead) continue;
        if (f.range.overlaps(e.range) && static_cast<double>(j) >= e.at) {
          ADD_FAILURE() << "input copy " << e.handle
                        << " may overwrite its buffer before the read at " << j << " has run";
        }
        if (static_cast<double>(j) >= e.at) overlaps = true;
      }
      overlapping += overlaps;
    }
  }
  return overlapping;
}

std::vector<float> train_on_batches(Backend& backend, const std::vector<Dataset>& batches) {
  Graph g = build_model("resnet18", ModelConfig{2, 32, 10, {}});
  Rng rng(1);
  g.declare_for(backend);
  Trainer t(backend, g, TrainConfig{}, rng);
  for (const Dataset& d : batches) {
    t.load_batch(d.images.data(), d.labels.data());
    t.step();
  }
  return t.take_losses();
}

// Swapping (--swap=all; runtime/nn/swap.h) through the same seam: every copy is waited for; no op
// logged between a copy out and its wait writes the bytes it reads, and none between a copy in
// and its wait reads or writes the bytes it writes. What a GPU's copy stream may run alongside
// the compute stream, here in the order the trainer issues it. The check has something to
// check: other tensors are written into swapped-out bytes while they wait in host memory.
TEST(SwapCopies, NoOpTouchesACopysBytesBeforeItsWaitAndEveryCopyIsWaitedFor) {
  Log log;
  RecordingBackend backend(log);
  Graph g = build_model("resnet18", ModelConfig{2, 32, 10, {}});
  Rng rng(1);
  g.declare_for(backend);
  TrainConfig tc;
  tc.step.memory_plan = MemoryPlanKind::kReuse;
  tc.step.swap = SwapPolicy{SwapPolicy::Kind::kAll, {}};
  Trainer t(backend, g, tc, rng);
  const Dataset d = make_synthetic(2, 3, 32, 10, 4);
  t.load_batch(d.images.data(), d.labels.data());
  log.events.clear();
  for (int s = 0; s < 2; ++s) t.step();
  t.flush();
  int copies = 0, reused = 0;
  for (size_t i = 0; i < log.events.size(); ++i) {
    const Event& e = log.events[i];
    if (e.kind != Event::kSwapOut && e.kind != Event::kSwapIn) continue;
    ++copies;
    const bool in = e.kind == Event::kSwapIn;
    size_t j = i + 1;
    for (; j < log.events.size(); ++j) {
      const Event& f = log.events[j];
      if (f.kind == Event::kWaitCopy && f.handle == e.handle) break;
      if (!f.range.overlaps(e.range)) continue;
      if (f.kind == Event::kWrite) {
        ADD_FAILURE() << "swap copy " << e.handle << " (" << (in ? "in" : "out")
                      << "): an op writes its bytes at " << j << " before its wait";
      }
      if (in && f.kind == Event::kRead) {
        ADD_FAILURE() << "swap copy " << e.handle << " (in): an op reads its bytes at " << j
                      << " before its wait";
      }
    }
    ASSERT_LT(j, log.events.size()) << "swap copy " << e.handle << " is never waited for";
    if (in) continue;
    // While it waits in host memory: another tensor written into its bytes.
    for (size_t k = j + 1; k < log.events.size(); ++k) {
      const Event& f = log.events[k];
      if (f.kind == Event::kSwapIn && f.range.overlaps(e.range)) break;
      if (f.kind == Event::kWrite && f.range.overlaps(e.range)) {
        ++reused;
        break;
      }
    }
  }
  EXPECT_EQ(copies, 2 * 2 * static_cast<int>(t.swapped().size())) << "out and in, each step";
  EXPECT_GT(reused, 0);
  std::printf("%d swap copies of %zu tensors; %d copies out whose bytes were reused meanwhile\n",
              copies, t.swapped().size(), reused);
}

// The device queue a communicator gets its stream and events from: on a device that does not
// exist (none does here) it is refused with an error the CLI reports, in any build.
TEST(DeviceQueue, ADeviceThatDoesNotExistIsRefusedNotACrash) {
  const int devices = visible_device_count();
  EXPECT_GE(devices, 0);
  EXPECT_THROW(make_device_queue(devices + 1000), Error);
}

TEST(InputPipeline, EachCopyOverlapsTheStepBeforeAndNeverRacesItsReaders) {
  std::vector<Dataset> batches;
  for (int i = 0; i < 5; ++i) batches.push_back(make_synthetic(2, 3, 32, 10, 10 + i));
  Log log;
  RecordingBackend backend(log, /*async_inputs=*/true);
  const std::vector<float> losses = train_on_batches(backend, batches);
  std::set<const char*> buffers;
  for (const Event& e : log.events) {
    if (e.kind == Event::kCopyIn) buffers.insert(e.range.begin);
  }
  EXPECT_EQ(buffers.size(), 4u) << "two image buffers and two label buffers, used in turn";
  // Every load after the first (images and labels) may overlap the step before it.
  EXPECT_EQ(check_inputs(log), 2 * (static_cast<int>(batches.size()) - 1));
  // Each step trained on its own batch: the losses are those of one synchronous buffer.
  CpuBackend cpu({});
  EXPECT_EQ(losses, train_on_batches(cpu, batches));
}

// Evaluation loads a batch and runs a forward pass, and a batch may be loaded twice before a
// step; a model whose first node is a view of the input (flatten) reads whichever buffer is
// current. Each still trains on its own batch, in order.
TEST(InputPipeline, EvaluationReloadsAndAnInputViewFollowTheCurrentBuffer) {
  std::vector<Dataset> batches;
  for (int i = 0; i < 4; ++i) batches.push_back(make_synthetic(2, 3, 4, 10, 20 + i));
  std::vector<float> losses[2];
  std::vector<int64_t> correct[2];
  for (int async = 0; async < 2; ++async) {
    Log log;
    RecordingBackend backend(log, async == 1);
    Graph g(Shape{2, 3, 4, 4});
    const int flat = g.add("flatten", std::make_unique<Flatten>(), {0});
    g.add("fc", std::make_unique<Linear>(48, 10), {flat});
    Rng rng(1);
    g.declare_for(backend);
    Trainer t(backend, g, TrainConfig{}, rng);
    for (const Dataset& d : batches) {
      t.load_batch(batches[0].images.data(), batches[0].labels.data());  // replaced at once
      t.load_batch(d.images.data(), d.labels.data());
      t.step();
      correct[async].push_back(t.count_correct(2));
    }
    losses[async] = t.take_losses();
    if (async) check_inputs(log);
  }
  EXPECT_EQ(losses[1], losses[0]);
  EXPECT_EQ(correct[1], correct[0]);
}

// The checkers themselves fail on each wrong order.
char input_bytes[64];
const Range kInput{input_bytes, input_bytes + 64};

TEST(InputPipelineChecker, CatchesAReadThatDoesNotWaitForItsCopy) {
  Log log;
  log.events.push_back({Event::kCopyIn, kInput, nullptr, 0});
  log.events.push_back({Event::kRead, kInput});
  EXPECT_NONFATAL_FAILURE(check_inputs(log), "does not wait for input copy 0");
}

TEST(InputPipelineChecker, CatchesACopyOverAnUnreadBuffer) {
  Log log;
  log.events.push_back({Event::kCopyIn, kInput, nullptr, 0});
  log.events.push_back({Event::kWaitInput, {}, nullptr, 0});
  log.events.push_back({Event::kRead, kInput});
  log.events.push_back({Event::kCopyIn, kInput, nullptr, 1, 2});  // waits for position 2 only
  EXPECT_NONFATAL_FAILURE(check_inputs(log), "before the read at 2 has run");
}

// The checker itself fails on each wrong order.
char grad_bytes[64];
const Range kGrad{grad_bytes, grad_bytes + 64};

TEST(StreamOrderChecker, CatchesAnUpdateBeforeItsReduction) {
  Log log;
  log.events.push_back({Event::kWrite, kGrad});
  log.events.push_back({Event::kAllreduce, kGrad, &stream_tag, 0});
  log.events.push_back({Event::kUpdate, kGrad});
  log.events.push_back({Event::kOrderBefore, kGrad, &stream_tag, 0});
  EXPECT_NONFATAL_FAILURE(check_order(log, {kGrad}), "runs before all-reduce 0");
}

TEST(StreamOrderChecker, CatchesAReductionBeforeItsGradientIsWritten) {
  Log log;
  log.events.push_back({Event::kAllreduce, kGrad, &stream_tag, 0});
  log.events.push_back({Event::kOrderBefore, kGrad, &stream_tag, 0});
  log.events.push_back({Event::kUpdate, kGrad});
  EXPECT_NONFATAL_FAILURE(check_order(log, {kGrad}), "starts before a gradient");
}

TEST(StreamOrderChecker, CatchesAGradientWrittenWhileItsReductionRuns) {
  Log log;
  log.events.push_back({Event::kWrite, kGrad});
  log.events.push_back({Event::kAllreduce, kGrad, &stream_tag, 0});
  log.events.push_back({Event::kWrite, kGrad});
  log.events.push_back({Event::kOrderBefore, kGrad, &stream_tag, 0});
  log.events.push_back({Event::kUpdate, kGrad});
  EXPECT_NONFATAL_FAILURE(check_order(log, {kGrad}), "is written before the reduction");
}

TEST(StreamOrderChecker, CatchesAReductionOrderedAfterNothing) {
  Log log;
  log.events.push_back({Event::kWrite, kGrad});
  log.events.push_back({Event::kAllreduce, kGrad, nullptr, 0});
  log.events.push_back({Event::kOrderBefore, kGrad, &stream_tag, 0});
  log.events.push_back({Event::kUpdate, kGrad});
  EXPECT_NONFATAL_FAILURE(check_order(log, {kGrad}), "not ordered after the stream");
}

}  // namespace
}  // namespace dlb
