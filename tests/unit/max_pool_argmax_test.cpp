// Max pooling that keeps its argmax (Backend::saves_pool_argmax), through everything above the
// kernels, on the host: a backend whose two argmax ops run the CUDA backend's functors
// (pooling_kernels.h) on host memory. A graph on it declares the places as saved state, trains
// bit for bit as the CPU backend's search does, and the op checker checks both ops (and catches
// a broken one).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "runtime/backend/cuda/pooling_kernels.h"
#include "runtime/backend/delegating_backend.h"
#include "runtime/check/op_checker.h"
#include "runtime/check/perturbing_backend.h"
#include "runtime/core/error.h"
#include "runtime/nn/memory_plan.h"
#include "runtime/train/trainer.h"
#include "workloads/data/dataset.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

cuda::Nchw nchw(const Tensor& t) { return {t.dim(1), t.dim(2), t.dim(3), false}; }

class ArgmaxBackend final : public DelegatingBackend {
 public:
  explicit ArgmaxBackend(bool broken = false) : broken_(broken) {}
  bool saves_pool_argmax() const override { return true; }
  void max_pool_forward_argmax(const PoolDesc& p, const Tensor& x, Tensor& y,
                               Tensor& argmax) override {
    ++forwards;
    const cuda::MaxPoolForwardArgmax<float> f{p,       x.data<float>(), nchw(x),
                                              nchw(y), y.data<float>(), argmax.data<int64_t>()};
    for (int64_t o = 0; o < y.numel(); ++o) f(o);
  }
  void max_pool_backward_argmax(const PoolDesc& p, const Tensor& argmax, const Tensor& dy,
                                Tensor& dx) override {
    ++backwards;
    const cuda::MaxPoolBackwardArgmax<float> f{
        p, argmax.data<int64_t>(), dy.data<float>(), nchw(dx), nchw(dy), dx.data<float>()};
    for (int64_t e = 0; e < dx.numel(); ++e) f(e);
    if (broken_) dx.data<float>()[dx.numel() / 2] += 1.f;
  }
  int forwards = 0, backwards = 0;

 private:
  bool broken_;
};

struct Trained {
  std::vector<float> losses;
  std::vector<std::vector<float>> weights;
  bool declared_argmax = false;
};

Trained train(DelegatingBackend& backend) {
  Graph g = build_model("resnet18", ModelConfig{2, 32, 10, {}});
  g.declare_for(backend);
  Trained out;
  for (const TensorInfo& t : g.tensor_infos()) out.declared_argmax |= t.name == "maxpool.argmax";
  Rng rng(9);
  TrainConfig tc;
  tc.sgd = SgdConfig{0.05f, 0.9f, 1e-4f};
  Trainer trainer(backend, g, tc, rng);
  const Dataset d = make_synthetic(2, 3, 32, 10, 8);
  trainer.load_batch(d.images.data(), d.labels.data());
  for (int s = 0; s < 3; ++s) trainer.step();
  out.losses = trainer.take_losses();
  for (const auto& np : g.named_params()) {
    std::vector<float> h(static_cast<size_t>(np.param.value.numel()));
    backend.copy_to_host(np.param.value, h.data());
    out.weights.push_back(h);
  }
  return out;
}

TEST(MaxPoolArgmax, AGraphKeepsThePlacesAndTrainsAsTheSearchDoes) {
  ArgmaxBackend kept;
  DelegatingBackend searched;
  const Trained a = train(kept), b = train(searched);
  EXPECT_TRUE(a.declared_argmax);
  EXPECT_FALSE(b.declared_argmax);
  EXPECT_EQ(kept.forwards, 3);
  EXPECT_EQ(kept.backwards, 3);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.weights, b.weights);
}

// A graph declared for a backend that searches (no argmax tensor) is refused by one that keeps
// the places, before any byte is allocated, and the other way round.
TEST(MaxPoolArgmax, AGraphDeclaredForTheOtherPoolingIsNotBound) {
  ArgmaxBackend kept;
  DelegatingBackend searched;
  Rng rng(1);
  Graph for_search = build_model("resnet18", ModelConfig{2, 32, 10, {}});
  for_search.declare_for(searched);
  EXPECT_THROW(
      for_search.bind(kept, rng, naive_plan(for_search.step_schedule(), for_search.tensor_infos())),
      InvalidArgument);
  Graph for_kept = build_model("resnet18", ModelConfig{2, 32, 10, {}});
  for_kept.declare_for(kept);
  EXPECT_THROW(
      for_kept.bind(searched, rng, naive_plan(for_kept.step_schedule(), for_kept.tensor_infos())),
      InvalidArgument);
}

TEST(MaxPoolArgmax, TheOpCheckerChecksBothOpsAndCatchesABrokenOne) {
  const OpInstance op = parse_op_instance("max_pool:shape=2x3x7x7,kernel=3,stride=2,pad=1");
  ArgmaxBackend good, broken(true);
  for (const PassResult& r : check_instance(good, op, {})) {
    EXPECT_EQ(r.status, CheckStatus::kOk) << check_pass_name(r.pass) << ": " << r.message;
  }
  EXPECT_EQ(good.forwards, 2);  // the forward pass's check, and the backward's places
  EXPECT_EQ(good.backwards, 1);
  for (const PassResult& r : check_instance(broken, op, {})) {
    EXPECT_EQ(r.status, r.pass == CheckPass::kForward ? CheckStatus::kOk : CheckStatus::kFail)
        << check_pass_name(r.pass);
  }
}

// check-ops --perturb breaks the backend's own argmax backward, not the search it replaces: the
// perturbing backend forwards saves_pool_argmax and both argmax ops to the backend it wraps.
TEST(MaxPoolArgmax, ThePerturbingBackendBreaksTheArgmaxBackward) {
  const OpInstance op = parse_op_instance("max_pool:shape=2x3x7x7,kernel=3,stride=2,pad=1");
  auto inner = std::make_unique<ArgmaxBackend>();
  const ArgmaxBackend& argmax = *inner;
  PerturbingBackend broken(std::move(inner), "max_pool.backward_data");
  EXPECT_TRUE(broken.saves_pool_argmax());
  for (const PassResult& r : check_instance(broken, op, {})) {
    EXPECT_EQ(r.status, r.pass == CheckPass::kForward ? CheckStatus::kOk : CheckStatus::kFail)
        << check_pass_name(r.pass);
  }
  EXPECT_EQ(argmax.forwards, 2);
  EXPECT_EQ(argmax.backwards, 1);
}

}  // namespace
}  // namespace dlb
