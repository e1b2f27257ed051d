// Every layer against finite differences: weights, biases and inputs, over strides, padding,
// groups and odd sizes.
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
  int64_t in, out, kernel, stride, pad, groups, h, w;
  bool bias;
};

class ConvGradcheck : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvGradcheck, MatchesFiniteDifferences) {
  const ConvCase c = GetParam();
  Conv2d conv(Conv2dOptions{c.in, c.out, c.kernel, c.stride, c.pad, c.groups, c.bias});
  check_layer(conv, {Shape{2, c.in, c.h, c.w}});
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConvGradcheck,
    ::testing::Values(ConvCase{3, 4, 3, 1, 1, 1, 6, 6, true},    // same padding
                      ConvCase{3, 5, 3, 2, 1, 1, 7, 5, true},    // stride 2, odd, non-square
                      ConvCase{2, 3, 5, 1, 0, 1, 7, 7, false},   // no padding, no bias
                      ConvCase{4, 6, 3, 2, 0, 2, 9, 8, true},    // groups
                      ConvCase{3, 4, 1, 2, 0, 1, 5, 5, false},   // 1x1 stride 2 (downsample)
                      ConvCase{3, 4, 7, 2, 3, 1, 9, 9, false},   // resnet stem
                      ConvCase{2, 3, 11, 4, 2, 1, 15, 15, true}  // alexnet stem
                      ));

TEST(Gradcheck, Linear) {
  Linear fc(7, 5);
  check_layer(fc, {Shape{3, 7}});
}

TEST(Gradcheck, BatchNorm2d) {
  BatchNorm bn(3);
  CheckOptions o;
  o.step = 1e-3;
  check_layer(bn, {Shape{4, 3, 3, 5}}, o);
}

TEST(Gradcheck, BatchNorm1d) {
  BatchNorm bn(4);
  CheckOptions o;
  o.step = 1e-3;
  check_layer(bn, {Shape{6, 4}}, o);
}

TEST(Gradcheck, Relu) {
  Relu relu;
  CheckOptions o;
  o.avoid_kinks = true;
  check_layer(relu, {Shape{2, 3, 4, 5}}, o);
}

TEST(Gradcheck, MaxPoolOverlappingPadded) {
  Pool2d pool(PoolMode::kMax, 3, 2, 1);
  CheckOptions o;
  o.avoid_kinks = true;
  check_layer(pool, {Shape{2, 3, 9, 7}}, o);
}

TEST(Gradcheck, MaxPoolNonOverlapping) {
  Pool2d pool(PoolMode::kMax, 2, 2, 0);
  CheckOptions o;
  o.avoid_kinks = true;
  check_layer(pool, {Shape{2, 2, 7, 6}}, o);
}

TEST(Gradcheck, AvgPoolPadded) {
  Pool2d pool(PoolMode::kAvg, 3, 2, 1);
  check_layer(pool, {Shape{2, 3, 7, 8}});
}

TEST(Gradcheck, AdaptiveAvgPoolShrinking) {
  AdaptiveAvgPool2d pool(3, 2);
  check_layer(pool, {Shape{2, 3, 7, 5}});
}

TEST(Gradcheck, AdaptiveAvgPoolGrowing) {  // vgg16 and alexnet on small images
  AdaptiveAvgPool2d pool(7, 7);
  check_layer(pool, {Shape{1, 2, 3, 2}});
}

TEST(Gradcheck, Dropout) {
  Dropout d(0.4f);
  check_layer(d, {Shape{3, 10}});
}

TEST(Gradcheck, Add) {
  Add add;
  check_layer(add, {Shape{2, 3, 4, 4}, Shape{2, 3, 4, 4}});
}

TEST(Gradcheck, Flatten) {
  Flatten f;
  check_layer(f, {Shape{2, 3, 2, 2}});
}

}  // namespace
}  // namespace dlb::testing
