// Gradients through a whole graph, including a fork whose gradients must be summed (a residual
// block with and without a downsample branch), checked against finite differences.
#include <gtest/gtest.h>

#include "runtime/nn/layers/batch_norm.h"
#include "runtime/nn/layers/conv2d.h"
#include "runtime/nn/layers/elementwise.h"
#include "runtime/nn/layers/linear.h"
#include "runtime/nn/layers/pooling.h"
#include "tests/gradcheck/gradient_checker.h"

namespace dlb::testing {
namespace {

std::unique_ptr<Conv2d> conv(int64_t in, int64_t out, int64_t k, int64_t s) {
  return std::make_unique<Conv2d>(Conv2dOptions{in, out, k, s, k / 2, 1, true});
}

class GraphGradcheck : public ::testing::TestWithParam<BackendKind> {
 protected:
  std::unique_ptr<Backend> backend = make_check_backend(GetParam());
};

TEST_P(GraphGradcheck, ResidualBlocksWithForks) {
  Graph g(Shape{2, 3, 6, 6});
  int x = g.add("stem", conv(3, 4, 3, 1), {g.input()});
  // Block 1: identity shortcut (x feeds conv and add).
  int y = g.add("b1.conv1", conv(4, 4, 3, 1), {x});
  y = g.add("b1.conv2", conv(4, 4, 3, 1), {y});
  x = g.add("b1.add", std::make_unique<Add>(), {y, x});
  // Block 2: downsample shortcut (x feeds two convolutions).
  y = g.add("b2.conv1", conv(4, 6, 3, 2), {x});
  int d = g.add("b2.down", conv(4, 6, 1, 2), {x});
  x = g.add("b2.add", std::make_unique<Add>(), {y, d});
  x = g.add("pool", std::make_unique<AdaptiveAvgPool2d>(1, 1), {x});
  x = g.add("flatten", std::make_unique<Flatten>(), {x});
  g.add("fc", std::make_unique<Linear>(6, 3), {x});
  check_graph(*backend, g);
}

TEST_P(GraphGradcheck, BatchNormBetweenConvolutions) {
  Graph g(Shape{3, 2, 5, 5});
  int x = g.add("conv1", conv(2, 3, 3, 1), {g.input()});
  x = g.add("bn1", std::make_unique<BatchNorm>(3), {x});
  x = g.add("conv2", conv(3, 2, 3, 2), {x});
  x = g.add("flatten", std::make_unique<Flatten>(), {x});
  g.add("fc", std::make_unique<Linear>(2 * 3 * 3, 4), {x});
  CheckOptions o;
  o.step = 1e-3;
  check_graph(*backend, g, o);
}

INSTANTIATE_TEST_SUITE_P(Backends, GraphGradcheck, ::testing::ValuesIn(gradcheck_backends()),
                         backend_param_name);

}  // namespace
}  // namespace dlb::testing
