// A small CNN for scikit-learn's 8x8 handwritten digits: two 3x3 convolutions, a 2x2 max pool
// and two linear layers. Trains to >95% test accuracy in seconds on a CPU.
#include "runtime/nn/layers/conv2d.h"
#include "runtime/nn/layers/elementwise.h"
#include "runtime/nn/layers/linear.h"
#include "runtime/nn/layers/pooling.h"
#include "workloads/models/model.h"
#include "workloads/models/sequential.h"

namespace dlb {

Graph build_digits_cnn(const ModelConfig& c) {
  Graph g(Shape{c.batch, 1, c.image_size, c.image_size});
  Chain ch(g, g.input());
  ch.seq("features", std::make_unique<Conv2d>(Conv2dOptions{1, 32, 3, 1, 1}));
  ch.seq("features", std::make_unique<Relu>());
  ch.seq("features", std::make_unique<Conv2d>(Conv2dOptions{32, 64, 3, 1, 1}));
  ch.seq("features", std::make_unique<Relu>());
  ch.seq("features", std::make_unique<Pool2d>(PoolMode::kMax, 2, 2));
  ch.then("flatten", std::make_unique<Flatten>());
  const int64_t pooled = c.image_size / 2;
  ch.restart_numbering();
  ch.seq("classifier", std::make_unique<Linear>(64 * pooled * pooled, 128));
  ch.seq("classifier", std::make_unique<Relu>());
  ch.seq("classifier", std::make_unique<Dropout>(c.dropout.value_or(0.25f)));
  ch.seq("classifier", std::make_unique<Linear>(128, c.num_classes));
  return g;
}

}  // namespace dlb
