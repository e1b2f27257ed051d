// Step 4 of docs/cuda.md's ladder for --cuda-graph: the trainer's captured steps, through a
// double that captures as a CUDA graph does. CapturingBackend runs the CPU backend's ops; between
// begin_capture and end_capture it records each op with its arguments as they were at the call
// (tensors by value: the same memory; seeds, sizes and scalars as numbers), runs none of them,
// and refuses what a capturing stream refuses (copies to or from the host, synchronising). A
// replay runs the recorded ops again. So a value that changes between steps but was passed as an
// argument (a per-step seed, a per-step slot) would be frozen at the captured step's, as on a GPU,
// and these tests would see it: captured steps must train exactly as steps run op by op.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/delegating_backend.h"
#include "runtime/core/error.h"
#include "runtime/train/trainer.h"
#include "workloads/data/dataset.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

class CapturingBackend : public DelegatingBackend {
 public:
  explicit CapturingBackend(bool async_inputs = false) : async_inputs_(async_inputs) {}
  std::string_view name() const override { return "capturing"; }
  bool async_input_copies() const override { return async_inputs_; }

  std::string capture_unsupported() const override { return {}; }
  void begin_capture() override {
    if (capturing_) throw InvalidArgument("capturing already");
    capturing_ = true;
    recorded_.clear();
  }
  std::unique_ptr<CapturedWork> end_capture() override {
    capturing_ = false;
    ++captures;
    return std::make_unique<Recorded>(std::exchange(recorded_, {}), *this);
  }
  void abandon_capture() noexcept override {
    capturing_ = false;
    recorded_.clear();
    ++abandoned;
  }

  // What a capturing CUDA stream refuses (cudaErrorStreamCaptureUnsupported).
  void copy_from_host(const void* src, Tensor& dst) override {
    refuse_while_capturing("a copy from the host");
    DelegatingBackend::copy_from_host(src, dst);
  }
  void copy_to_host(const Tensor& src, void* dst) override {
    refuse_while_capturing("a copy to the host");
    DelegatingBackend::copy_to_host(src, dst);
  }
  void synchronize() override { refuse_while_capturing("synchronize"); }

  // Test hooks: an op that fails, or one that allocates, while a step is captured; scratch
  // memory that moves.
  std::function<void()> on_captured_op;
  void move_scratch() { scratch_moved(); }

  int captures = 0, abandoned = 0, replays = 0;

 protected:
  void dispatch(const char*, std::function<void()> op) override {
    if (!capturing_) {
      op();
      return;
    }
    if (on_captured_op) on_captured_op();
    recorded_.push_back(std::move(op));
  }

 private:
  class Recorded final : public CapturedWork {
   public:
    Recorded(std::vector<std::function<void()>> ops, CapturingBackend& owner)
        : ops_(std::move(ops)), owner_(owner) {}
    void replay() override {
      ++owner_.replays;
      for (auto& op : ops_) op();
    }
    int64_t operations() const override { return static_cast<int64_t>(ops_.size()); }

   private:
    std::vector<std::function<void()>> ops_;
    CapturingBackend& owner_;
  };
  // As the CUDA backend reports cudaErrorStreamCaptureUnsupported (runtime/backend/cuda/device.cu).
  void refuse_while_capturing(const char* what) const {
    if (capturing_) {
      throw Unsupported(fmt::format("{}: operation not permitted when stream is capturing", what));
    }
  }

  bool async_inputs_;
  bool capturing_ = false;
  std::vector<std::function<void()>> recorded_;
};

TrainConfig config(bool capture) {
  TrainConfig c;
  c.sgd = SgdConfig{0.05f, 0.9f, 1e-4f};
  c.seed = 5;
  c.step.capture = capture;
  return c;
}

const ModelConfig kDigits{4, 8, 10, {}};  // digits-cnn, batch 4 at 8x8: it has a dropout

// digits-cnn declared for `backend`; a trainer binds it with weights from kSeed (as train()).
constexpr uint64_t kSeed = 9;
Graph digits_cnn(Backend& backend) {
  Graph g = build_model("digits-cnn", kDigits);
  g.declare_for(backend);
  return g;
}

// train()'s first batch into `t`, then the first step, which runs op by op.
void first_step(Trainer& t) {
  const Dataset d = make_synthetic(kDigits.batch, 1, kDigits.image_size, kDigits.num_classes, 40);
  t.load_batch(d.images.data(), d.labels.data());
  t.step();
}

std::vector<std::vector<unsigned char>> weights(Graph& g) {
  std::vector<std::vector<unsigned char>> out;
  for (auto& [name, t] : g.state_dict()) out.push_back(t.bytes);
  return out;
}

struct Outcome {
  std::vector<float> losses;
  std::vector<std::vector<unsigned char>> weights;
  float scale = 0;
  int64_t skipped = 0;
  StepGraphStats graphs;
  int captures = 0, replays = 0;
};

// `steps` steps of `model` on a fixed batch, or on a new batch before each step.
Outcome train(const std::string& model, const ModelConfig& mc, Precision precision, bool capture,
              int steps, bool new_batches = false, LossScaleConfig scaling = {},
              std::unique_ptr<CapturingBackend> made = nullptr) {
  if (!made) made = std::make_unique<CapturingBackend>(/*async_inputs=*/new_batches);
  CapturingBackend& backend = *made;
  Graph g = build_model(model, mc);
  Rng rng(9);
  g.declare_for(backend, PrecisionPolicy::for_precision(precision));
  TrainConfig c = config(capture);
  c.loss_scaling = scaling;
  Trainer t(backend, g, c, rng);
  const int64_t channels = g.shape(0)[1];
  for (int i = 0; i < steps; ++i) {
    if (i == 0 || new_batches) {
      const Dataset d = make_synthetic(mc.batch, channels, mc.image_size, mc.num_classes, 40 + i);
      t.load_batch(d.images.data(), d.labels.data());
    }
    t.step();
  }
  Outcome o;
  o.losses = t.take_losses();
  o.weights = weights(g);
  if (LossScaler* s = t.loss_scaler()) {
    o.scale = s->scale();
    o.skipped = s->skipped_steps();
  }
  o.graphs = t.step_graphs();
  o.captures = backend.captures;
  o.replays = backend.replays;
  return o;
}

void expect_same_training(const Outcome& captured, const Outcome& eager) {
  EXPECT_EQ(captured.losses, eager.losses);
  EXPECT_TRUE(captured.weights == eager.weights) << "the weights differ";
  EXPECT_EQ(captured.scale, eager.scale);
  EXPECT_EQ(captured.skipped, eager.skipped);
}

// digits-cnn has dropout (0.25): each replay must draw its own step's mask.
TEST(CapturedStep, DropoutDrawsEachReplaysOwnMask) {
  const Outcome eager = train("digits-cnn", kDigits, Precision::kFp32, false, 6);
  const Outcome captured = train("digits-cnn", kDigits, Precision::kFp32, true, 6);
  expect_same_training(captured, eager);
  EXPECT_EQ(eager.captures, 0);
  EXPECT_EQ(captured.captures, 1);
  EXPECT_EQ(captured.replays, 5);  // the first step runs op by op
  EXPECT_EQ(captured.graphs.graphs, 1);
  EXPECT_EQ(captured.graphs.replayed_steps, 5);
  EXPECT_GT(captured.graphs.operations, 10);
}

// The double sees a frozen argument: a dropout that reads the step counter when it is called
// (as a seed passed by value to a kernel would be) trains op by op as before, but its replays
// all draw the captured step's mask, and the losses part from the eager run's.
class FrozenSeedBackend final : public CapturingBackend {
 public:
  using CapturingBackend::CapturingBackend;
  void dropout_forward(const Tensor& x, float p, const DropoutSeed& s, Tensor& m,
                       Tensor& y) override {
    const uint64_t frozen = s.base + static_cast<uint64_t>(s.step ? *s.step->data<int64_t>() : 0);
    CapturingBackend::dropout_forward(x, p, DropoutSeed{frozen}, m, y);
  }
};

TEST(CapturedStep, AFrozenSeedWouldBeSeen) {
  const Outcome eager = train("digits-cnn", kDigits, Precision::kFp32, false, 5);
  const Outcome frozen_eager = train("digits-cnn", kDigits, Precision::kFp32, false, 5, false, {},
                                     std::make_unique<FrozenSeedBackend>());
  const Outcome frozen_captured = train("digits-cnn", kDigits, Precision::kFp32, true, 5, false, {},
                                        std::make_unique<FrozenSeedBackend>());
  EXPECT_EQ(frozen_eager.losses, eager.losses);
  ASSERT_EQ(frozen_captured.losses.size(), 5u);
  // Steps 0 and 1 drew their own masks (step 1 is the captured one); 2 to 4 repeat step 1's.
  EXPECT_EQ(frozen_captured.losses[1], eager.losses[1]);
  EXPECT_NE(frozen_captured.losses, eager.losses);
}

// Batch norm's running statistics and the optimizer's momentum live in memory; resnet18 at 32x32.
TEST(CapturedStep, Resnet18TrainsAsOpByOp) {
  const ModelConfig mc{2, 32, 10, {}};
  expect_same_training(train("resnet18", mc, Precision::kFp32, true, 4),
                       train("resnet18", mc, Precision::kFp32, false, 4));
}

// fp16's loss scale lives on the device: growth (every 2 clean steps here) and the skipped-step
// count continue through replays. bf16 has none.
TEST(CapturedStep, LossScaleStateFollowsTheReplays) {
  const LossScaleConfig fast{1024.f, 2.f, 0.5f, 2};
  const Outcome eager = train("digits-cnn", kDigits, Precision::kFp16, false, 7, false, fast);
  const Outcome captured = train("digits-cnn", kDigits, Precision::kFp16, true, 7, false, fast);
  expect_same_training(captured, eager);
  EXPECT_EQ(eager.scale, 1024.f * 8);  // 7 clean steps: grown after steps 2, 4 and 6
  expect_same_training(train("digits-cnn", kDigits, Precision::kBf16, true, 4),
                       train("digits-cnn", kDigits, Precision::kBf16, false, 4));
}

// Double-buffered input: a graph per input buffer, each reading its own buffer's batch.
TEST(CapturedStep, OneGraphPerInputBuffer) {
  const Outcome eager = train("digits-cnn", kDigits, Precision::kFp32, false, 6, true);
  const Outcome captured = train("digits-cnn", kDigits, Precision::kFp32, true, 6, true);
  expect_same_training(captured, eager);
  EXPECT_EQ(captured.captures, 2);
  EXPECT_EQ(captured.graphs.graphs, 2);
  EXPECT_EQ(captured.graphs.replayed_steps, 5);
}

// Scratch memory that moved after a capture (a graph would write memory it no longer owns):
// the next step captures again, and training goes on as op by op.
TEST(CapturedStep, MovedScratchIsCapturedAgain) {
  const Outcome eager = train("digits-cnn", kDigits, Precision::kFp32, false, 5);
  CapturingBackend backend;
  Graph g = digits_cnn(backend);
  Rng init(kSeed);
  Trainer t(backend, g, config(true), init);
  first_step(t);
  t.step();
  t.step();
  backend.move_scratch();
  t.step();
  t.step();
  EXPECT_EQ(backend.captures, 2);
  EXPECT_EQ(t.step_graphs().graphs, 2);
  EXPECT_EQ(t.step_graphs().replayed_steps, 4);
  EXPECT_EQ(t.take_losses(), eager.losses);
  EXPECT_TRUE(weights(g) == eager.weights);
}

TEST(CapturedStep, TheCpuBackendRefusesWithTheReason) {
  auto b = make_backend(BackendKind::kCpu, {});
  Graph g = digits_cnn(*b);
  try {
    Rng init(kSeed);
    Trainer t(*b, g, config(true), init);
    FAIL() << "the cpu backend captured";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("--cuda-graph needs --backend=cuda"), std::string::npos)
        << e.what();
  }
}

TEST(CapturedStep, RefusesAHookAndATracer) {
  CapturingBackend backend;
  Graph g = digits_cnn(backend);
  TrainConfig hooked = config(true);
  hooked.mid_step_hook = [](int64_t) {};
  Rng unused(kSeed);
  EXPECT_THROW(Trainer(backend, g, hooked, unused), InvalidArgument);
  Rng init(kSeed);
  Trainer t(backend, g, config(true), init);
  Tracer tracer(0, 1, &backend.clock());
  EXPECT_THROW(t.set_tracer(&tracer), Unsupported);
}

// A capture that fails midway is abandoned (the stream is no longer capturing) and named; so is
// one that allocates, whose graph would write memory the allocator may hand out again.
TEST(CapturedStep, AFailedOrAllocatingCaptureIsRefused) {
  for (int allocating = 0; allocating < 2; ++allocating) {
    CapturingBackend backend;
    Graph g = digits_cnn(backend);
    Rng init(kSeed);
    Trainer t(backend, g, config(true), init);
    first_step(t);
    std::vector<Tensor> held;
    backend.on_captured_op = [&] {
      if (allocating) {
        if (held.empty()) {
          held.push_back(backend.empty({16}, DType::kF32, MemCategory::kWorkspace, "scratch"));
        }
      } else {
        throw Unsupported("cudaErrorStreamCaptureUnsupported");
      }
    };
    try {
      t.step();
      FAIL() << "the capture succeeded";
    } catch (const Unsupported& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(allocating ? "allocated memory 1 times" : "could not be captured"),
                std::string::npos)
          << m;
    }
    EXPECT_EQ(backend.abandoned, allocating ? 0 : 1);
    backend.on_captured_op = nullptr;
    EXPECT_NO_THROW(backend.synchronize());  // not capturing any more
  }
}

// A fault of the device while capturing is not a refusal: it passes through as itself (a sweep
// records it as failed, not unsupported), and the capture is abandoned.
TEST(CapturedStep, ADeviceFaultWhileCapturingPassesThrough) {
  CapturingBackend backend;
  Graph g = digits_cnn(backend);
  Rng init(kSeed);
  Trainer t(backend, g, config(true), init);
  first_step(t);
  backend.on_captured_op = [] { throw DeviceError("an illegal memory access was encountered"); };
  EXPECT_THROW(t.step(), DeviceError);
  EXPECT_EQ(backend.abandoned, 1);
}

}  // namespace
}  // namespace dlb
