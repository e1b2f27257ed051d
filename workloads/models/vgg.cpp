// torchvision.models.vgg16 (configuration "D", no batch norm): 138,357,544 parameters.
#include "runtime/nn/layers/conv2d.h"
#include "runtime/nn/layers/elementwise.h"
#include "runtime/nn/layers/linear.h"
#include "runtime/nn/layers/pooling.h"
#include "workloads/models/model.h"
#include "workloads/models/sequential.h"

namespace dlb {

Graph build_vgg16(const ModelConfig& c) {
  constexpr int64_t kPool = 0;
  const int64_t cfg[] = {64,    64,  kPool, 128, 128,   kPool, 256, 256, 256,
                         kPool, 512, 512,   512, kPool, 512,   512, 512, kPool};
  Graph g(Shape{c.batch, 3, c.image_size, c.image_size});
  Chain ch(g, g.input());
  int64_t in = 3;
  for (int64_t v : cfg) {
    if (v == kPool) {
      ch.seq("features", std::make_unique<Pool2d>(PoolMode::kMax, 2, 2));
      continue;
    }
    ch.seq("features", std::make_unique<Conv2d>(
                           Conv2dOptions{in, v, 3, 1, 1, 1, true, Init::kKaimingNormalFanOut}));
    ch.seq("features", std::make_unique<Relu>());
    in = v;
  }
  ch.then("avgpool", std::make_unique<AdaptiveAvgPool2d>(7, 7));
  ch.then("flatten", std::make_unique<Flatten>());
  const float p = c.dropout.value_or(0.5f);
  ch.restart_numbering();
  ch.seq("classifier", std::make_unique<Linear>(512 * 7 * 7, 4096, Init::kNormal001));
  ch.seq("classifier", std::make_unique<Relu>());
  ch.seq("classifier", std::make_unique<Dropout>(p));
  ch.seq("classifier", std::make_unique<Linear>(4096, 4096, Init::kNormal001));
  ch.seq("classifier", std::make_unique<Relu>());
  ch.seq("classifier", std::make_unique<Dropout>(p));
  ch.seq("classifier", std::make_unique<Linear>(4096, c.num_classes, Init::kNormal001));
  return g;
}

}  // namespace dlb
