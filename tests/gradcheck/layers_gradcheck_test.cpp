// Every layer against finite differences: weights, biases and inputs, over strides, padding,
// groups and odd sizes, on every backend of gradcheck_backends() (convolution: with each of its
// algorithms).
#include <gtest/gtest.h>

#include "runtime/nn/layers/batch_norm.h"
#include "runtime/nn/layers/conv2d.h"
#include "runtime/nn/layers/elementwise.h"
#include "runtime/nn/layers/linear.h"
#include "runtime/nn/layers/pooling.h"
#include "tests/gradcheck/gradient_checker.h"

namespace dlb::testing {
namespace {

struct ConvCase {
  const char* name;
  int64_t in, out, kernel, stride, pad, groups, h, w;
  bool bias;
};
void PrintTo(const ConvCase& c, std::ostream* os) {
  *os << c.name << " (" << c.in << "->" << c.out << " k" << c.kernel << " s" << c.stride << " p"
      << c.pad << " g" << c.groups << " " << c.h << "x" << c.w << (c.bias ? " bias" : "") << ")";
}

// Once per convolution algorithm each backend names (cpu: im2col, oneDNN and Winograd).
class ConvGradcheck : public ::testing::TestWithParam<
                          std::tuple<std::pair<BackendKind, ConvAlgoChoice>, ConvCase>> {};

TEST_P(ConvGradcheck, MatchesFiniteDifferences) {
  const auto& [backend_algo, c] = GetParam();
  auto backend = make_check_backend(backend_algo.first, backend_algo.second);
  Conv2d conv(Conv2dOptions{c.in, c.out, c.kernel, c.stride, c.pad, c.groups, c.bias});
  check_layer(*backend, conv, {Shape{2, c.in, c.h, c.w}});
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConvGradcheck,
    ::testing::Combine(
        ::testing::ValuesIn(gradcheck_conv_algorithms()),
        ::testing::Values(ConvCase{"same_padding", 3, 4, 3, 1, 1, 1, 6, 6, true},
                          ConvCase{"stride2_odd_nonsquare", 3, 5, 3, 2, 1, 1, 7, 5, true},
                          ConvCase{"no_padding_no_bias", 2, 3, 5, 1, 0, 1, 7, 7, false},
                          ConvCase{"groups", 4, 6, 3, 2, 0, 2, 9, 8, true},
                          ConvCase{"downsample_1x1_stride2", 3, 4, 1, 2, 0, 1, 5, 5, false},
                          ConvCase{"resnet_stem", 3, 4, 7, 2, 3, 1, 9, 9, false},
                          ConvCase{"alexnet_stem", 2, 3, 11, 4, 2, 1, 15, 15, true},
                          // what oneDNN's Winograd takes: 16 channels, tiles cut by both edges
                          ConvCase{"winograd_tiles", 16, 16, 3, 1, 1, 1, 6, 7, true})),
    [](const auto& info) {
      // No structured binding or template arguments: a comma would split the macro's arguments.
      const auto backend_algo = std::get<0>(info.param);
      return std::string(backend_kind_name(backend_algo.first)) + "_" +
             std::string(conv_algo_choice_name(backend_algo.second)) + "_" +
             std::get<1>(info.param).name;
    });

// Every other layer, on each backend.
class Gradcheck : public ::testing::TestWithParam<BackendKind> {
 protected:
  std::unique_ptr<Backend> backend = make_check_backend(GetParam());
};

TEST_P(Gradcheck, Linear) {
  Linear fc(7, 5);
  check_layer(*backend, fc, {Shape{3, 7}});
}

// A convolution that applies the ReLU after it (as the graph gives it one: Conv2d::fuse_relu):
// its forward with the ReLU (in place after the convolution), its one backward pass from the masked
// gradient. The kink is in its output: probes that straddle it are skipped.
TEST_P(Gradcheck, Conv2dWithItsRelu) {
  for (bool bias : {true, false}) {
    Conv2dOptions c{3, 4, 3, 1, 1};
    c.bias = bias;
    Conv2d conv(c);
    conv.fuse_relu();
    CheckOptions o;
    o.skip_output_kinks = true;
    o.step = 1e-3;  // a weight moves all 60 outputs of its channel: fewer straddle at this step
    check_layer(*backend, conv, {Shape{2, 3, 5, 6}}, o);
  }
}

TEST_P(Gradcheck, BatchNorm2d) {
  BatchNorm bn(3);
  CheckOptions o;
  o.step = 1e-3;
  check_layer(*backend, bn, {Shape{4, 3, 3, 5}}, o);
}

TEST_P(Gradcheck, BatchNorm1d) {
  BatchNorm bn(4);
  CheckOptions o;
  o.step = 1e-3;
  check_layer(*backend, bn, {Shape{6, 4}}, o);
}

TEST_P(Gradcheck, Relu) {
  Relu relu;
  CheckOptions o;
  o.avoid_kinks = true;
  check_layer(*backend, relu, {Shape{2, 3, 4, 5}}, o);
}

TEST_P(Gradcheck, MaxPoolOverlappingPadded) {
  Pool2d pool(PoolMode::kMax, 3, 2, 1);
  CheckOptions o;
  o.avoid_kinks = true;
  check_layer(*backend, pool, {Shape{2, 3, 9, 7}}, o);
}

TEST_P(Gradcheck, MaxPoolNonOverlapping) {
  Pool2d pool(PoolMode::kMax, 2, 2, 0);
  CheckOptions o;
  o.avoid_kinks = true;
  check_layer(*backend, pool, {Shape{2, 2, 7, 6}}, o);
}

TEST_P(Gradcheck, AvgPoolPadded) {
  Pool2d pool(PoolMode::kAvg, 3, 2, 1);
  check_layer(*backend, pool, {Shape{2, 3, 7, 8}});
}

TEST_P(Gradcheck, AdaptiveAvgPoolShrinking) {
  AdaptiveAvgPool2d pool(3, 2);
  check_layer(*backend, pool, {Shape{2, 3, 7, 5}});
}

TEST_P(Gradcheck, AdaptiveAvgPoolGrowing) {  // vgg16 and alexnet on small images
  AdaptiveAvgPool2d pool(7, 7);
  check_layer(*backend, pool, {Shape{1, 2, 3, 2}});
}

TEST_P(Gradcheck, Dropout) {
  Dropout d(0.4f);
  check_layer(*backend, d, {Shape{3, 10}});
}

TEST_P(Gradcheck, Add) {
  Add add;
  check_layer(*backend, add, {Shape{2, 3, 4, 4}, Shape{2, 3, 4, 4}});
}

TEST_P(Gradcheck, Flatten) {
  Flatten f;
  check_layer(*backend, f, {Shape{2, 3, 2, 2}});
}

INSTANTIATE_TEST_SUITE_P(Backends, Gradcheck, ::testing::ValuesIn(gradcheck_backends()),
                         backend_param_name);

}  // namespace
}  // namespace dlb::testing
