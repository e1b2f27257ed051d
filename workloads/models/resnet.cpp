// torchvision.models.resnet18 (BasicBlock), resnet50 and resnet101 (v1.5 Bottleneck: the stride
// sits on the 3x3 convolution). 11,689,512, 25,557,032 and 44,549,160 parameters at 1000 classes.
#include <fmt/format.h>

#include "runtime/nn/layers/batch_norm.h"
#include "runtime/nn/layers/conv2d.h"
#include "runtime/nn/layers/elementwise.h"
#include "runtime/nn/layers/linear.h"
#include "runtime/nn/layers/pooling.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

std::unique_ptr<Conv2d> conv(int64_t in, int64_t out, int64_t k, int64_t stride) {
  return std::make_unique<Conv2d>(
      Conv2dOptions{in, out, k, stride, k / 2, 1, false, Init::kKaimingNormalFanOut});
}

// conv -> bn [-> relu]; returns the last node.
int conv_bn(Graph& g, const std::string& p, const std::string& idx, int from, int64_t in,
            int64_t out, int64_t k, int64_t stride) {
  int x = g.add(p + "conv" + idx, conv(in, out, k, stride), {from});
  return g.add(p + "bn" + idx, std::make_unique<BatchNorm>(out), {x});
}

int relu(Graph& g, const std::string& name, int from) {
  return g.add(name, std::make_unique<Relu>(), {from});
}

// The residual sum, the downsample branch when shapes change, and the final ReLU.
int finish_block(Graph& g, const std::string& p, int block_in, int branch, int64_t in, int64_t out,
                 int64_t stride, int relu_index) {
  int identity = block_in;
  if (stride != 1 || in != out) {
    int d = g.add(p + "downsample.0", conv(in, out, 1, stride), {block_in});
    identity = g.add(p + "downsample.1", std::make_unique<BatchNorm>(out), {d});
  }
  int sum = g.add(p + "add", std::make_unique<Add>(), {branch, identity});
  return relu(g, fmt::format("{}relu#{}", p, relu_index), sum);
}

int basic_block(Graph& g, const std::string& p, int x, int64_t in, int64_t planes, int64_t stride) {
  int y = conv_bn(g, p, "1", x, in, planes, 3, stride);
  y = relu(g, p + "relu", y);
  y = conv_bn(g, p, "2", y, planes, planes, 3, 1);
  return finish_block(g, p, x, y, in, planes, stride, 2);
}

int bottleneck(Graph& g, const std::string& p, int x, int64_t in, int64_t planes, int64_t stride) {
  constexpr int64_t kExpansion = 4;
  int y = conv_bn(g, p, "1", x, in, planes, 1, 1);
  y = relu(g, p + "relu", y);
  y = conv_bn(g, p, "2", y, planes, planes, 3, stride);
  y = relu(g, p + "relu#2", y);
  y = conv_bn(g, p, "3", y, planes, planes * kExpansion, 1, 1);
  return finish_block(g, p, x, y, in, planes * kExpansion, stride, 3);
}

Graph build_resnet(const ModelConfig& c, bool use_bottleneck, const int (&blocks)[4]) {
  const int64_t expansion = use_bottleneck ? 4 : 1;
  Graph g(Shape{c.batch, 3, c.image_size, c.image_size});
  int x = conv_bn(g, "", "1", g.input(), 3, 64, 7, 2);
  x = relu(g, "relu", x);
  x = g.add("maxpool", std::make_unique<Pool2d>(PoolMode::kMax, 3, 2, 1), {x});
  int64_t in = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t planes = int64_t{64} << stage;
    for (int b = 0; b < blocks[stage]; ++b) {
      const std::string p = fmt::format("layer{}.{}.", stage + 1, b);
      const int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
      x = use_bottleneck ? bottleneck(g, p, x, in, planes, stride)
                         : basic_block(g, p, x, in, planes, stride);
      in = planes * expansion;
    }
  }
  x = g.add("avgpool", std::make_unique<AdaptiveAvgPool2d>(1, 1), {x});
  x = g.add("flatten", std::make_unique<Flatten>(), {x});
  g.add("fc", std::make_unique<Linear>(512 * expansion, c.num_classes), {x});
  return g;
}

}  // namespace

Graph build_resnet18(const ModelConfig& c) { return build_resnet(c, false, {2, 2, 2, 2}); }
Graph build_resnet50(const ModelConfig& c) { return build_resnet(c, true, {3, 4, 6, 3}); }
Graph build_resnet101(const ModelConfig& c) { return build_resnet(c, true, {3, 4, 23, 3}); }

}  // namespace dlb
