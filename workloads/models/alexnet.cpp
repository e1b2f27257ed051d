// torchvision.models.alexnet: 61,100,840 parameters at 1000 classes.
#include "runtime/nn/layers/conv2d.h"
#include "runtime/nn/layers/elementwise.h"
#include "runtime/nn/layers/linear.h"
#include "runtime/nn/layers/pooling.h"
#include "workloads/models/model.h"
#include "workloads/models/sequential.h"

namespace dlb {

Graph build_alexnet(const ModelConfig& c) {
  Graph g(Shape{c.batch, 3, c.image_size, c.image_size});
  Chain ch(g, g.input());
  auto conv = [](int64_t in, int64_t out, int64_t k, int64_t s, int64_t p) {
    return std::make_unique<Conv2d>(Conv2dOptions{in, out, k, s, p, 1, true, Init::kTorchDefault});
  };
  auto relu = [] { return std::make_unique<Relu>(); };
  auto maxpool = [] { return std::make_unique<Pool2d>(PoolMode::kMax, 3, 2); };
  ch.seq("features", conv(3, 64, 11, 4, 2));
  ch.seq("features", relu());
  ch.seq("features", maxpool());
  ch.seq("features", conv(64, 192, 5, 1, 2));
  ch.seq("features", relu());
  ch.seq("features", maxpool());
  ch.seq("features", conv(192, 384, 3, 1, 1));
  ch.seq("features", relu());
  ch.seq("features", conv(384, 256, 3, 1, 1));
  ch.seq("features", relu());
  ch.seq("features", conv(256, 256, 3, 1, 1));
  ch.seq("features", relu());
  ch.seq("features", maxpool());
  ch.then("avgpool", std::make_unique<AdaptiveAvgPool2d>(6, 6));
  ch.then("flatten", std::make_unique<Flatten>());
  const float p = c.dropout.value_or(0.5f);
  ch.restart_numbering();
  ch.seq("classifier", std::make_unique<Dropout>(p));
  ch.seq("classifier", std::make_unique<Linear>(256 * 6 * 6, 4096));
  ch.seq("classifier", relu());
  ch.seq("classifier", std::make_unique<Dropout>(p));
  ch.seq("classifier", std::make_unique<Linear>(4096, 4096));
  ch.seq("classifier", relu());
  ch.seq("classifier", std::make_unique<Linear>(4096, c.num_classes));
  return g;
}

}  // namespace dlb
