// Bounded staleness (--sync=stale:K; runtime/overlap/sync_schedule.h) against a reference that
// applies the same gradients K steps late: on one rank (nothing to average), a trainer at rate 0
// computes each step's gradients at the reference's weights, and SGD with momentum is applied by
// hand, as the CPU kernel does, with the gradients of K steps before. After 10 steps the stale
// trainer's weights match within 1e-6 relative; after its flush (the last K gradients, oldest
// first) they match the reference's with those applied too. Multi-rank staleness averages across
// ranks as sync does (tests/integration/data_parallel.sh).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/train/trainer.h"
#include "workloads/data/dataset.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

using Weights = std::map<std::string, std::vector<float>>;

constexpr int64_t kBatch = 8;
constexpr float kLr = 0.05f, kMomentum = 0.9f;

// Each parameter's value, or its gradient (`Param::grad`), by name.
Weights copy_of(const Graph& g, Tensor Param::*which = &Param::value) {
  Weights w;
  for (const auto& np : g.named_params()) {
    const Tensor& t = np.param.*which;
    w[np.name].assign(t.data<float>(), t.data<float>() + t.numel());
  }
  return w;
}

void set_params(Graph& g, const Weights& w) {
  for (const auto& np : g.named_params()) {
    float* p = np.param.value.data<float>();
    std::copy(w.at(np.name).begin(), w.at(np.name).end(), p);
  }
}

// As the CPU kernel (runtime/backend/cpu/sgd.cpp), weight decay 0.
void sgd(Weights& w, Weights& velocity, const Weights& g) {
  for (auto& [name, p] : w) {
    std::vector<float>& v = velocity[name];
    v.resize(p.size(), 0.f);
    const std::vector<float>& d = g.at(name);
    for (size_t i = 0; i < p.size(); ++i) {
      v[i] = kMomentum * v[i] + d[i];
      p[i] -= kLr * v[i];
    }
  }
}

double worst_relative(const Weights& a, const Weights& b) {
  double worst = 0;
  for (const auto& [name, x] : a) {
    const std::vector<float>& y = b.at(name);
    double diff = 0, scale = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      diff = std::max(diff, std::fabs(static_cast<double>(x[i]) - y[i]));
      scale = std::max(scale, std::fabs(static_cast<double>(y[i])));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

class StaleSync : public ::testing::TestWithParam<int64_t> {};

TEST_P(StaleSync, AppliesTheGradientsOfKStepsBefore) {
  const int64_t k = GetParam(), steps = 10;
  auto b = make_backend(BackendKind::kCpu, {});
  const Dataset data = make_synthetic(kBatch * steps, 1, 8, 10, 7);  // a batch per step
  auto trainer = [&](Graph& g, float lr, int64_t staleness) {
    Rng rng(0);
    g.declare_for(*b);
    TrainConfig c;
    c.sgd = SgdConfig{lr, kMomentum, 0.f};
    c.step.sync = SyncMode{SyncMode::Kind::kStale, staleness};
    return std::make_unique<Trainer>(*b, g, c, rng);
  };
  Graph stale_graph = build_model("digits-cnn", ModelConfig{kBatch, 8, 10, 0.f});
  Graph grad_graph = build_model("digits-cnn", ModelConfig{kBatch, 8, 10, 0.f});
  auto stale = trainer(stale_graph, kLr, k);
  auto grads = trainer(grad_graph, 0.f, 0);  // rate 0: its steps compute gradients only
  const Weights first = copy_of(stale_graph);
  Weights reference = first, velocity;
  std::vector<Weights> history;
  for (int64_t t = 0; t < steps; ++t) {
    const float* images = data.images.data() + t * kBatch * 64;
    const int64_t* labels = data.labels.data() + t * kBatch;
    stale->load_batch(images, labels);
    stale->step();
    set_params(grad_graph, reference);
    grads->load_batch(images, labels);
    grads->step();
    history.push_back(copy_of(grad_graph, &Param::grad));
    if (t >= k) sgd(reference, velocity, history[t - k]);
  }
  EXPECT_LT(worst_relative(copy_of(stale_graph), reference), 1e-6)
      << "after " << steps << " steps of stale:" << k;
  // The delay matters: the same gradients applied each in its own step give other weights.
  Weights undelayed = first, undelayed_velocity;
  for (const Weights& g : history) sgd(undelayed, undelayed_velocity, g);
  EXPECT_GT(worst_relative(copy_of(stale_graph), undelayed), 1e-3);
  // The flush applies the last K, oldest first.
  stale->flush();
  for (int64_t t = steps - k; t < steps; ++t) sgd(reference, velocity, history[t]);
  EXPECT_LT(worst_relative(copy_of(stale_graph), reference), 1e-6) << "after the flush";
}

INSTANTIATE_TEST_SUITE_P(K, StaleSync, ::testing::Values(1, 2, 4));

TEST(StaleSync, TakesNoOverlapAndNoLossScaling) {
  auto b = make_backend(BackendKind::kCpu, {});
  Graph g = build_model("digits-cnn", ModelConfig{kBatch, 8, 10, 0.f});
  Rng rng(0);
  g.declare_for(*b);
  TrainConfig c;
  c.step.sync = SyncMode{SyncMode::Kind::kStale, 2};
  c.step.overlap = OverlapStrategy::kBackward;
  EXPECT_THROW(Trainer(*b, g, c, rng), InvalidArgument);
}

}  // namespace
}  // namespace dlb
