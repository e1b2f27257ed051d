// --memory-guard (memory/memory_guard.h): a write of one element past a buffer, or before it, or
// into the zeros between two parameters' gradients, fails the step after the pass that wrote it,
// naming the pass and the buffer. (Without the guard the same write lands in the heap's own
// bookkeeping, which no test may do.) A guarded step trains exactly as an unguarded one.
#include "runtime/memory/memory_guard.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/delegating_backend.h"
#include "runtime/core/error.h"
#include "runtime/core/rng.h"
#include "runtime/train/trainer.h"
#include "workloads/data/dataset.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

std::unique_ptr<Backend> cpu(bool guard) {
  BackendOptions o;
  o.memory_guard = guard;
  return std::make_unique<CpuBackend>(o);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const DeviceError& e) {
    return e.what();
  }
  return "";
}

TEST(MemoryGuard, AWriteOneBytePastABufferIsNamed) {
  auto a = std::make_shared<Allocator>(make_host_memory_resource());
  a->enable_guard();
  auto b = a->allocate(12, MemCategory::kActivations, "twelve bytes");
  a->check_guards("nothing");  // untouched zones
  static_cast<uint8_t*>(b->data())[12] = 0;
  const std::string e = error_of([&] { a->check_guards("the pass that wrote it"); });
  EXPECT_NE(e.find("after the pass that wrote it"), std::string::npos) << e;
  EXPECT_NE(e.find("'twelve bytes' (activations, 12 bytes)"), std::string::npos) << e;
  EXPECT_NE(e.find("the first at byte 0 past its end"), std::string::npos) << e;
}

TEST(MemoryGuard, AWriteBeforeABufferAndAWriteIntoAFreedOnesZoneAreNamed) {
  auto a = std::make_shared<Allocator>(make_host_memory_resource());
  a->enable_guard();
  auto b = a->allocate(64, MemCategory::kWorkspace, "scratch");
  static_cast<uint8_t*>(b->data())[-3] = 7;
  std::string e = error_of([&] { a->check_guards("x"); });
  EXPECT_NE(e.find("before 'scratch'"), std::string::npos) << e;
  EXPECT_NE(e.find("byte 3 before its start"), std::string::npos) << e;
  auto c = a->allocate(64, MemCategory::kWorkspace, "temporary");
  static_cast<uint8_t*>(c->data())[64 + 100] = 7;
  b.reset();
  c.reset();  // freed inside a pass: reported by the check after it
  e = error_of([&] { a->check_guards("y"); });
  EXPECT_NE(e.find("'temporary'"), std::string::npos) << e;
  EXPECT_NE(e.find("byte 100 past its end (found when it was freed)"), std::string::npos) << e;
}

TEST(MemoryGuard, ItMustBeOnBeforeTheFirstAllocation) {
  auto a = std::make_shared<Allocator>(make_host_memory_resource());
  auto b = a->allocate(4, MemCategory::kData, "early");
  EXPECT_THROW(a->enable_guard(), InvalidArgument);
}

// A backend whose ReLU, or whose convolution's weight gradient, writes one float too many.
class OverrunningBackend final : public DelegatingBackend {
 public:
  OverrunningBackend(bool guard, bool in_relu) : DelegatingBackend(cpu(guard)), in_relu_(in_relu) {}
  void relu_forward(const Tensor& x, Tensor& y) override {
    DelegatingBackend::relu_forward(x, y);
    if (in_relu_) y.data<float>()[y.numel()] = 1.f;
  }
  void conv_backward_filter(const ConvPlan& p, const Tensor& x, const Tensor& dy,
                            Tensor& dw) override {
    DelegatingBackend::conv_backward_filter(p, x, dy, dw);
    if (!in_relu_) dw.data<float>()[dw.numel()] = 1.f;
  }

 private:
  bool in_relu_;
};

// Steps of `model` at batch 2 on synthetic data; the losses.
std::vector<float> train(Backend& backend, const std::string& model, int64_t size, int steps) {
  const ModelInfo& info = find_model(model);
  Graph g = build_model(model, ModelConfig{2, size, 10, {}});
  Rng rng(1);
  g.declare_for(backend);
  Trainer t(backend, g, TrainConfig{}, rng);
  const Dataset d = make_synthetic(2, info.in_channels, size, 10, 3);
  t.load_batch(d.images.data(), d.labels.data());
  for (int s = 0; s < steps; ++s) t.step();
  return t.take_losses();
}

void one_step(Backend& backend) { train(backend, "digits-cnn", 8, 1); }

TEST(MemoryGuard, AnOverrunInAStepIsNamedWithItsPass) {
  OverrunningBackend relu(true, true);
  std::string e = error_of([&] { one_step(relu); });
  EXPECT_NE(e.find("after forward of features.1"), std::string::npos) << e;
  EXPECT_NE(e.find("after 'features.1' (activations"), std::string::npos) << e;

  OverrunningBackend conv(true, false);
  e = error_of([&] { one_step(conv); });
  EXPECT_NE(e.find("after backward_weights of features.2"), std::string::npos) << e;
  EXPECT_NE(e.find("gap after the gradient of features.2.weight"), std::string::npos) << e;
}

TEST(MemoryGuard, AGuardedStepTrainsAsAnUnguardedOne) {
  auto plain = cpu(false), guarded = cpu(true);
  EXPECT_EQ(train(*plain, "resnet18", 32, 2), train(*guarded, "resnet18", 32, 2));
}

}  // namespace
}  // namespace dlb
