// The bound step (runtime/nn/bound_step.h): it stores a program's table as the plan says, owns
// that storage, moves the views of a re-bound tensor with it, and a graph that borrowed its table
// is no longer set up, and runs nothing, once it is gone.
#include "runtime/nn/bound_step.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/core/error.h"
#include "runtime/nn/graph.h"
#include "runtime/nn/layers/elementwise.h"
#include "runtime/nn/layers/linear.h"
#include "runtime/train/executor.h"
#include "runtime/train/step_program.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

// The input flattened, then a linear layer: the flatten's output is a view of the input.
Graph flatten_on_input() {
  Graph g(Shape{2, 3, 4, 4});
  const int flat = g.add("flatten", std::make_unique<Flatten>(), {0});
  g.add("fc", std::make_unique<Linear>(48, 5), {flat});
  return g;
}

TEST(BoundStep, StoresEveryTensorWhereThePlanPutsIt) {
  auto backend = make_backend(BackendKind::kCpu, {});
  Graph g = build_model("digits-cnn", ModelConfig{2, 8, 10, {}});
  g.declare_for(*backend);
  const StepProgram p = build_step(g, StepSpec{}, StepTarget{});
  const MemoryPlan plan = plan_step(p);
  const BoundStep bound(backend->allocator(), plan, p.tensors);
  ASSERT_EQ(bound.size(), p.tensors.size());
  for (size_t id = 0; id < p.tensors.size(); ++id) {
    const TensorInfo& info = p.tensors[id];
    SCOPED_TRACE(info.name);
    const Tensor& t = bound.tensor(static_cast<int>(id));
    EXPECT_EQ(t.shape(), info.shape);
    EXPECT_EQ(t.dtype(), info.dtype);
    EXPECT_EQ(t.layout(), info.layout);
    const auto* bytes = static_cast<const char*>(t.raw());
    if (plan.buffer_of[id] >= 0) {
      // Tensors of one buffer sit at their planned offsets from each other.
      const int first = static_cast<int>(
          std::find(plan.buffer_of.begin(), plan.buffer_of.end(), plan.buffer_of[id]) -
          plan.buffer_of.begin());
      const auto* base = static_cast<const char*>(bound.tensor(first).raw());
      EXPECT_EQ(bytes - base, static_cast<std::ptrdiff_t>(plan.offset_of[id]) -
                                  static_cast<std::ptrdiff_t>(plan.offset_of[first]));
    } else {  // a view: its base's bytes from its offset
      const Tensor& base = bound.tensor(info.alias_of);
      EXPECT_EQ(bytes, static_cast<const char*>(base.raw()) +
                           info.offset * static_cast<int64_t>(dtype_size(base.dtype())));
    }
  }
  EXPECT_THROW(bound.tensor(static_cast<int>(p.tensors.size())), InvalidArgument);
  EXPECT_THROW(bound.tensor(-1), InvalidArgument);
}

TEST(BoundStep, RebindingATensorMovesItsViewsWithIt) {
  auto backend = make_backend(BackendKind::kCpu, {});
  Graph g = flatten_on_input();
  g.declare_for(*backend);
  Rng rng(0);
  BoundStep bound =
      g.bind(*backend, rng, naive_plan(g.step_schedule(), g.tensor_infos()), g.tensor_infos());
  const int input = g.output_id(g.input()), flat = g.output_id(1);
  ASSERT_EQ(g.tensor_infos()[flat].alias_of, input);
  Tensor other = backend->empty(Shape{2, 3, 4, 4}, DType::kF32, MemCategory::kData, "other");
  bound.rebind(input, other);
  EXPECT_EQ(bound.tensor(input).raw(), other.raw());
  EXPECT_EQ(bound.tensor(flat).raw(), other.raw());
  EXPECT_EQ(bound.tensor(flat).shape(), (Shape{2, 48}));
  // The layers read it: the linear layer's forward pass reads the new input.
  const std::vector<float> ones(96, 1.f);
  backend->copy_from_host(ones.data(), other);
  const LayerContext ctx{*backend, false, 0};
  Executor(g.forward_schedule(), PassRunners{&g}, backend->clock()).run(0, &ctx);
  const Tensor& fc_weight = g.layer_tensors(2).get("weight");
  const Tensor& fc_bias = g.layer_tensors(2).get("bias");
  double expect = fc_bias.data<float>()[0];
  for (int k = 0; k < 48; ++k) expect += fc_weight.data<float>()[k];
  EXPECT_NEAR(bound.tensor(g.output_id(2)).data<float>()[0], expect, 1e-5);
  // Another shape or dtype is refused, naming the tensor.
  const Tensor wrong = backend->empty(Shape{2, 3, 4, 5}, DType::kF32, MemCategory::kData, "wrong");
  EXPECT_THROW(bound.rebind(input, wrong), InvalidArgument);
}

TEST(BoundStep, AGraphWhoseBoundStepIsGoneIsNotSetUpAndRunsNothing) {
  auto backend = make_backend(BackendKind::kCpu, {});
  Graph g = flatten_on_input();
  g.declare_for(*backend);
  Rng rng(0);
  const Schedule forward = g.forward_schedule();
  {
    const BoundStep bound =
        g.bind(*backend, rng, naive_plan(g.step_schedule(), g.tensor_infos()), g.tensor_infos());
    EXPECT_TRUE(g.is_setup());
    EXPECT_GT(backend->allocator().stats().total_current, 0u);
  }
  EXPECT_FALSE(g.is_setup());
  EXPECT_EQ(backend->allocator().stats().total_current, 0u);  // the storage went with the step
  const LayerContext ctx{*backend, false, 0};
  EXPECT_THROW(g.run(forward.steps.at(0), ctx), InvalidArgument);
  EXPECT_THROW(g.state_dict(), InvalidArgument);
  // It binds again, on a new step.
  const BoundStep again =
      g.bind(*backend, rng, naive_plan(g.step_schedule(), g.tensor_infos()), g.tensor_infos());
  EXPECT_TRUE(g.is_setup());
  Executor(forward, PassRunners{&g}, backend->clock()).run(0, &ctx);
}

}  // namespace
}  // namespace dlb
