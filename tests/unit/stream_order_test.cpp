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
// waits; record at the end, the consumer waits). The double checks order, never numerics.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/comm/communicator.h"
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
  enum Kind { kWrite, kAllreduce, kOrderBefore, kUpdate } kind;
  Range range;
  const void* stream = nullptr;
  int handle = -1;
};

struct Log {
  std::vector<Event> events;
  int next_handle = 0;
};

int stream_tag;  // the recording backend's "stream": any non-null address

// The CPU backend's ops, logging the tensors each one writes.
class RecordingBackend final : public Backend {
 public:
  explicit RecordingBackend(Log& log)
      : Backend(std::make_shared<Allocator>(make_host_memory_resource())), log_(log) {}
  std::string_view name() const override { return "recording"; }
  std::map<std::string, std::string> environment() const override { return {}; }
  bool supports(Op op, const OpTypes& t) const override { return cpu_.supports(op, t); }
  StreamRef stream() const override { return {&stream_tag}; }

  void copy_from_host(const void* src, Tensor& dst) override { cpu_.copy_from_host(src, dst); }
  void copy_to_host(const Tensor& src, void* dst) override { cpu_.copy_to_host(src, dst); }
  void copy(const Tensor& src, Tensor& dst) override { w(dst), cpu_.copy(src, dst); }
  void fill(Tensor& t, float v) override { w(t), cpu_.fill(t, v); }
  void synchronize() override {}
  std::unique_ptr<ConvPlan> make_conv_plan(const ConvDesc& d) override {
    return cpu_.make_conv_plan(d);
  }
  void conv_forward(const ConvPlan& p, const Tensor& x, const Tensor& wt, Tensor& y) override {
    cpu_.conv_forward(p, x, wt, y);
  }
  void conv_backward_data(const ConvPlan& p, const Tensor& dy, const Tensor& wt,
                          Tensor& dx) override {
    cpu_.conv_backward_data(p, dy, wt, dx);
  }
  void conv_backward_filter(const ConvPlan& p, const Tensor& x, const Tensor& dy,
                            Tensor& dw) override {
    w(dw), cpu_.conv_backward_filter(p, x, dy, dw);
  }
  void bias_add(const Tensor& b, Tensor& y) override { cpu_.bias_add(b, y); }
  void bias_backward(const Tensor& dy, Tensor& db) override { w(db), cpu_.bias_backward(dy, db); }
  void matmul(Precision m, bool ta, bool tb, float alpha, const Tensor& a, const Tensor& b,
              float beta, Tensor& c) override {
    w(c), cpu_.matmul(m, ta, tb, alpha, a, b, beta, c);
  }
  void batch_norm_train(const Tensor& x, const Tensor& g, const Tensor& b, Tensor& rm, Tensor& rv,
                        Tensor& sm, Tensor& si, Tensor& y, float mo, float eps) override {
    cpu_.batch_norm_train(x, g, b, rm, rv, sm, si, y, mo, eps);
  }
  void batch_norm_infer(const Tensor& x, const Tensor& g, const Tensor& b, const Tensor& rm,
                        const Tensor& rv, Tensor& y, float eps) override {
    cpu_.batch_norm_infer(x, g, b, rm, rv, y, eps);
  }
  void batch_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& g, const Tensor& sm,
                           const Tensor& si, Tensor& dx, Tensor& dg, Tensor& db) override {
    w(dg), w(db), cpu_.batch_norm_backward(x, dy, g, sm, si, dx, dg, db);
  }
  void relu_forward(const Tensor& x, Tensor& y) override { cpu_.relu_forward(x, y); }
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) override {
    cpu_.relu_backward(y, dy, dx);
  }
  void pool_forward(const PoolDesc& p, const Tensor& x, Tensor& y) override {
    cpu_.pool_forward(p, x, y);
  }
  void pool_backward(const PoolDesc& p, const Tensor& x, const Tensor& y, const Tensor& dy,
                     Tensor& dx) override {
    cpu_.pool_backward(p, x, y, dy, dx);
  }
  void adaptive_avg_pool_forward(const Tensor& x, Tensor& y) override {
    cpu_.adaptive_avg_pool_forward(x, y);
  }
  void adaptive_avg_pool_backward(const Tensor& dy, Tensor& dx) override {
    cpu_.adaptive_avg_pool_backward(dy, dx);
  }
  void dropout_forward(const Tensor& x, float p, uint64_t s, Tensor& m, Tensor& y) override {
    cpu_.dropout_forward(x, p, s, m, y);
  }
  void dropout_backward(const Tensor& dy, const Tensor& m, Tensor& dx) override {
    cpu_.dropout_backward(dy, m, dx);
  }
  void add(const Tensor& a, const Tensor& b, Tensor& y) override { cpu_.add(a, b, y); }
  void accumulate(const Tensor& x, Tensor& y) override { w(y), cpu_.accumulate(x, y); }
  void softmax_cross_entropy(const Tensor& z, const Tensor& l, Tensor& p, Tensor& loss) override {
    cpu_.softmax_cross_entropy(z, l, p, loss);
  }
  void softmax_cross_entropy_backward(const Tensor& p, const Tensor& l, Tensor& dz) override {
    cpu_.softmax_cross_entropy_backward(p, l, dz);
  }
  void sgd_update(const SgdConfig& c, const Tensor& g, Tensor& m, Tensor& p) override {
    log_.events.push_back({Event::kUpdate, range_of(g)});
    cpu_.sgd_update(c, g, m, p);
  }

 private:
  void w(const Tensor& t) { log_.events.push_back({Event::kWrite, range_of(t)}); }
  CpuBackend cpu_{{}};
  Log& log_;
};

class RecordingHandle final : public CommHandle {
 public:
  RecordingHandle(Log& log, Range r, int id) : log_(log), range_(r), id_(id) {}
  bool test() override {
    stamp_completion();
    return true;
  }
  void wait() override { stamp_completion(); }
  void order_before(StreamRef consumer) override {
    stamp_completion();
    log_.events.push_back({Event::kOrderBefore, range_, consumer.native, id_});
  }

 private:
  Log& log_;
  Range range_;
  int id_;
};

// Two ranks with identical gradients: the average is the identity, so training is unchanged.
class RecordingCommunicator final : public Communicator {
 public:
  explicit RecordingCommunicator(Log& log) : log_(log) {}
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
    return std::make_unique<RecordingHandle>(log_, range_of(buffer), id);
  }

 private:
  Log& log_;
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
  RecordingCommunicator comm(log);
  Graph g = build_model("resnet18", ModelConfig{2, 32, 10, {}});
  Rng rng(1);
  g.setup(backend, rng);
  TrainConfig tc;
  tc.comm = &comm;
  tc.overlap = GetParam();
  tc.bucket_mb = 2;  // several buckets
  Trainer t(backend, g, tc);
  const Dataset d = make_synthetic(2, 3, 32, 10, 4);
  t.load_batch(d.images.data(), d.labels.data());
  log.events.clear();
  for (int s = 0; s < 3; ++s) t.step();
  t.flush();
  std::vector<Range> grads;
  for (const auto& np : g.named_params()) grads.push_back(range_of(np.param->grad));
  check_order(log, grads);
}

INSTANTIATE_TEST_SUITE_P(Strategies, StreamOrder,
                         ::testing::Values(OverlapStrategy::kNone, OverlapStrategy::kBackward,
                                           OverlapStrategy::kForward),
                         [](const auto& info) { return std::string(overlap_name(info.param)); });

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
