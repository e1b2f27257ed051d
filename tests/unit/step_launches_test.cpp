// What one resnet50 training step asks of its backend, counted at the seam: every op call by
// name, every allocation, every wait for the device. On the CUDA backend each op call is a fixed
// number of launches (kCudaLaunches, read from its op families' code), so these counts are the
// step's launches there; docs/cuda.md states them with the reason for each group. A step must
// allocate nothing and wait for nothing: the loss is read back every loss_readback_steps steps,
// outside the step.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>

#include "runtime/backend/delegating_backend.h"
#include "runtime/train/trainer.h"
#include "workloads/data/dataset.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

using Counts = std::map<std::string, int64_t>;

// The CPU backend's ops, counted while `counting`. It claims the batch-norm + ReLU fusion, as
// the CUDA backend does, so the graph is the one a GPU runs; the composed ops it overrides
// (the fused pair, the grouped update) run on the inner backend and count once.
class CountingBackend final : public DelegatingBackend {
 public:
  bool counting = false;
  Counts calls;

  bool fuses_batch_norm_relu(const OpTypes&) const override { return true; }
  void batch_norm_relu_train(const Tensor& x, const Tensor& g, const Tensor& b, Tensor& rm,
                             Tensor& rv, Tensor& sm, Tensor& si, Tensor& y, float mo,
                             float eps) override {
    count("batch_norm_relu_train");
    inner().batch_norm_relu_train(x, g, b, rm, rv, sm, si, y, mo, eps);
  }
  void batch_norm_relu_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& g,
                                const Tensor& sm, const Tensor& si, Tensor& dx, Tensor& dg,
                                Tensor& db) override {
    count("batch_norm_relu_backward");
    inner().batch_norm_relu_backward(x, y, dy, g, sm, si, dx, dg, db);
  }
  void batch_norm_train_counted(bool relu, const Tensor& x, const Tensor& g, const Tensor& b,
                                Tensor& rm, Tensor& rv, Tensor& sm, Tensor& si, Tensor& y, float mo,
                                float eps, Tensor* n) override {
    count(relu ? "batch_norm_relu_train" : "batch_norm_train");
    inner().batch_norm_train_counted(relu, x, g, b, rm, rv, sm, si, y, mo, eps, n);
  }
  void sgd_update_group(const SgdConfig& cfg, const std::vector<SgdParamRef>& group,
                        const Tensor* scaler) override {
    count("sgd_update_group");
    inner().sgd_update_group(cfg, group, scaler);
  }
  void copy_to_host(const Tensor& src, void* dst) override {
    count("copy_to_host");
    DelegatingBackend::copy_to_host(src, dst);
  }
  void copy_from_host(const void* src, Tensor& dst) override {
    count("copy_from_host");
    DelegatingBackend::copy_from_host(src, dst);
  }
  void synchronize() override {
    count("synchronize");
    DelegatingBackend::synchronize();
  }

 protected:
  void dispatch(const char* name, std::function<void()> op) override {
    count(name);
    op();
  }

 private:
  void count(const char* name) {
    if (counting) ++calls[name];
  }
};

// Kernel launches (or library executions) per call on the CUDA backend, from runtime/backend/cuda:
// a cuDNN graph is one execution (its engine may run more than one kernel); batch norm in
// training is its graph and the running-statistics kernel, which also advances
// num_batches_tracked (batch_norm_train_counted); the loss is a block per row for its maximum, one
// for its sum, the probabilities by element, one block for the terms' sum, and the mean; a grouped
// update is one launch per 256 parameters of one gradient type.
const Counts kCudaLaunches{{"conv_forward", 1},
                           {"conv_backward_data", 1},
                           {"conv_backward_filter", 1},
                           {"batch_norm_relu_train", 2},
                           {"batch_norm_train", 2},
                           {"batch_norm_relu_backward", 1},
                           {"batch_norm_backward", 1},
                           {"relu_forward", 1},
                           {"relu_backward", 1},
                           {"pool_forward", 1},
                           {"pool_backward", 1},
                           {"adaptive_avg_pool_forward", 1},
                           {"adaptive_avg_pool_backward", 1},
                           {"add", 1},
                           {"accumulate", 1},
                           {"matmul", 1},
                           {"bias_add", 1},
                           {"bias_backward", 1},
                           {"softmax_cross_entropy", 5},
                           {"softmax_cross_entropy_backward", 1},
                           {"sgd_update_group", 1},
                           {"increment", 1},
                           {"copy", 1}};

// 53 convolutions (conv1's input is the image: no data gradient); 53 batch norms, 33 with the
// ReLU after them fused, each advancing its num_batches_tracked in the pass; a ReLU after each of
// the 16 residual adds, whose backward copies nothing (residual_gradient_test.cpp); a fork at
// each of the 16 blocks' input, whose second gradient is accumulated; the classifier's product
// and bias; the step counter; the loss into its history. The update is one call per gradient
// bucket, as DDP's (about 1 MiB first, then 25 MiB: 5 for resnet50's 94 MiB at 10 classes),
// each updated once its all-reduce is waited for; one rank keeps the same passes.
const Counts kResnet50Step{{"conv_forward", 53},
                           {"conv_backward_data", 52},
                           {"conv_backward_filter", 53},
                           {"batch_norm_relu_train", 33},
                           {"batch_norm_train", 20},
                           {"batch_norm_relu_backward", 33},
                           {"batch_norm_backward", 20},
                           {"relu_forward", 16},
                           {"relu_backward", 16},
                           {"pool_forward", 1},
                           {"pool_backward", 1},
                           {"adaptive_avg_pool_forward", 1},
                           {"adaptive_avg_pool_backward", 1},
                           {"add", 16},
                           {"accumulate", 16},
                           {"matmul", 3},
                           {"bias_add", 1},
                           {"bias_backward", 1},
                           {"softmax_cross_entropy", 1},
                           {"softmax_cross_entropy_backward", 1},
                           {"sgd_update_group", 5},
                           {"increment", 1},
                           {"copy", 1}};

TEST(StepLaunches, Resnet50StepCallsAllocationsAndWaits) {
  CountingBackend backend;
  Graph g = build_model("resnet50", ModelConfig{2, 32, 10, {}});
  g.declare_for(backend);
  Rng rng(3);
  TrainConfig tc;
  tc.loss_readback_steps = 1000;
  Trainer trainer(backend, g, tc, rng);
  const Dataset d = make_synthetic(2, 3, 32, 10, 4);
  trainer.load_batch(d.images.data(), d.labels.data());
  trainer.step();  // the first step makes plans and workspace
  std::vector<Counts> per_step;
  std::vector<uint64_t> allocations;
  for (int s = 0; s < 2; ++s) {
    const uint64_t before = backend.allocator().allocations();
    backend.calls.clear();
    backend.counting = true;
    trainer.step();
    backend.counting = false;
    per_step.push_back(backend.calls);
    allocations.push_back(backend.allocator().allocations() - before);
  }
  EXPECT_EQ(per_step[0], per_step[1]);  // every step the same
  EXPECT_EQ(allocations, (std::vector<uint64_t>{0, 0}));
  const Counts& calls = per_step[0];
  EXPECT_EQ(calls.count("synchronize") + calls.count("copy_to_host"), 0u);  // no wait
  EXPECT_EQ(calls, kResnet50Step);
  int64_t launches = 0;
  for (const auto& [name, n] : calls) {
    const auto it = kCudaLaunches.find(name);
    ASSERT_NE(it, kCudaLaunches.end()) << name << ": no launch count stated";
    launches += n * it->second;
    std::printf("resnet50 step: %-32s %3lld calls, %3lld CUDA launches\n", name.c_str(),
                static_cast<long long>(n), static_cast<long long>(n * it->second));
  }
  std::printf("resnet50 step: %lld CUDA launches, 0 allocations, 0 waits\n",
              static_cast<long long>(launches));
  EXPECT_EQ(launches, 403);
}

}  // namespace
}  // namespace dlb
