// Where a graph stores its tensors for a backend whose 16-bit activations are channels-last (the
// CUDA backend's choice, Backend::activation_layout), checked on the CPU backend told to report
// that layout: the graph's decisions need no GPU, and nothing but setup runs here (the CPU backend
// itself computes on NCHW activations only).
#include <gtest/gtest.h>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/core/rng.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

class ReportsChannelsLast final : public CpuBackend {
 public:
  ReportsChannelsLast() : CpuBackend(BackendOptions{}) {}
  Layout activation_layout(const OpTypes& t) const override {
    return t.data == DType::kF32 ? Layout::kNCHW : Layout::kNHWC;
  }
  bool blocks_conv_weights(const OpTypes&) const override { return false; }  // as CUDA's
};

struct Case {
  const char* model;
  int64_t image_size;
  const char* before_flatten;  // the node a flatten reads
  Layout its_layout;           // NCHW where it has more than one pixel per channel
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.model; }

class ChannelsLastGraph : public ::testing::TestWithParam<Case> {};

TEST_P(ChannelsLastGraph, ActivationsAndConvWeightCopiesAreChannelsLastButWhatFlattenReads) {
  const Case& c = GetParam();
  ReportsChannelsLast backend;
  Graph g = build_model(c.model, ModelConfig{2, c.image_size, 10, {}});
  Rng rng(1);
  g.setup(backend, rng, PrecisionPolicy::for_precision(Precision::kBf16));
  EXPECT_EQ(g.bound().tensor(g.output_id(g.input())).layout(), Layout::kNHWC);
  int flattens = 0, nhwc = 0;
  for (int i = 1; i <= g.output(); ++i) {
    const Graph::Node& node = g.nodes()[i];
    SCOPED_TRACE(node.name);
    const Tensor& out = g.bound().tensor(g.output_id(i));
    if (node.shape.rank() != 4) {
      EXPECT_EQ(out.layout(), Layout::kNCHW);  // flattened and linear: row-major
    } else if (node.name == c.before_flatten) {
      EXPECT_EQ(out.layout(), c.its_layout);
    } else {
      EXPECT_EQ(out.layout(), Layout::kNHWC);
      ++nhwc;
    }
    if (g.grad_id(i) >= 0) {
      EXPECT_EQ(g.bound().tensor(g.grad_id(i)).layout(), out.layout());
    }
    flattens += node.layer->kind() == "flatten";
  }
  EXPECT_EQ(flattens, 1);
  EXPECT_GT(nhwc, 0);
  for (const auto& np : g.named_params()) {
    SCOPED_TRACE(np.name);
    const Param& p = np.param;
    EXPECT_EQ(p.value.layout(), Layout::kNCHW);  // the masters keep torchvision's layout
    const Layout four_d = p.value.shape().rank() == 4 ? Layout::kNHWC : Layout::kNCHW;
    EXPECT_EQ(p.grad.layout(), four_d);
    if (p.has_compute_copy()) {
      EXPECT_EQ(p.compute.layout(), four_d);
    }
  }
}

TEST_P(ChannelsLastGraph, Fp32StaysNchwThroughout) {
  ReportsChannelsLast backend;
  Graph g = build_model(GetParam().model, ModelConfig{2, GetParam().image_size, 10, {}});
  Rng rng(1);
  g.setup(backend, rng, PrecisionPolicy::for_precision(Precision::kFp32));
  for (int i = 0; i <= g.output(); ++i) {
    EXPECT_EQ(g.bound().tensor(g.output_id(i)).layout(), Layout::kNCHW) << g.nodes()[i].name;
  }
  for (const auto& np : g.named_params()) EXPECT_EQ(np.param.grad.layout(), Layout::kNCHW);
}

INSTANTIATE_TEST_SUITE_P(Models, ChannelsLastGraph,
                         ::testing::Values(Case{"resnet18", 32, "avgpool",
                                                Layout::kNHWC},  // 1x1 before its flatten
                                           Case{"alexnet", 63, "avgpool", Layout::kNCHW},  // 6x6
                                           Case{"vgg16", 32, "avgpool", Layout::kNCHW},    // 7x7
                                           Case{"digits-cnn", 8, "features.4", Layout::kNCHW}),
                         [](const auto& info) {
                           std::string name = info.param.model;
                           return name == "digits-cnn" ? std::string("digits_cnn") : name;
                         });

}  // namespace
}  // namespace dlb
