// Step 3 of docs/cuda.md's ladder, without a GPU: every cuDNN graph and cuBLASLt layout the CUDA
// backend builds, for every convolution, batch-norm (with and without its ReLU) and linear layer of
// every reference model at 224, 64 and 32 pixels (where the model accepts the size), in every
// precision (f32 with strict or TF32 math; f16 and bf16 storage computing in f32), built exactly
// as the backend builds them and checked by the real libraries. cuDNN finalizes each operation
// graph with no handle: it refuses wrong shapes, strides or types there (a mismatch fails, see the
// last tests). The frontend's inferred output shape must be the layer's.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/backend/cuda/cudnn_graphs.h"
#include "runtime/backend/cuda/matmul_lt.h"
#include "runtime/core/error.h"
#include "runtime/nn/layers/batch_norm.h"
#include "runtime/nn/layers/conv2d.h"
#include "runtime/nn/layers/linear.h"
#include "workloads/models/model.h"

namespace dlb::cuda {
namespace {

struct ModelAtSize {
  std::string model;
  int64_t image_size;
};
void PrintTo(const ModelAtSize& c, std::ostream* os) { *os << c.model << " at " << c.image_size; }

std::vector<ModelAtSize> cases() {
  std::vector<ModelAtSize> out;
  for (const ModelInfo& m : model_registry()) {
    for (int64_t size : {224, 64, 32}) {
      if (size >= min_image_size(m)) out.push_back({m.name, size});
    }
  }
  return out;
}

class LibraryCalls : public ::testing::TestWithParam<ModelAtSize> {
 protected:
  // Batch 2: the graphs do not depend on the batch beyond their dimensions.
  Graph graph() const {
    return build_model(GetParam().model, ModelConfig{2, GetParam().image_size, 1000, {}});
  }
};

std::vector<int64_t> dims(const Shape& s) { return s.dims(); }

// The types a convolution or linear layer sees under each precision's policy.
std::vector<OpTypes> layer_types() {
  std::vector<OpTypes> out;
  for (Precision p : kPrecisions) out.push_back(OpTypes::of(PrecisionPolicy::for_precision(p)));
  return out;
}
const DType kStorage[] = {DType::kF32, DType::kF16, DType::kBF16};
// The layouts a backend may store these types in: 16-bit data is channels-last on the CUDA backend
// (and was NCHW before); f32 is NCHW.
std::vector<Layout> layouts_for(DType data) {
  if (data == DType::kF32) return {Layout::kNCHW};
  return {Layout::kNHWC, Layout::kNCHW};
}

TEST_P(LibraryCalls, EveryConvolutionGraphIsAcceptedByCudnn) {
  const Graph g = graph();
  int convs = 0, with_bias = 0;
  for (const auto& node : g.nodes()) {
    const auto* conv = dynamic_cast<const Conv2d*>(node.layer.get());
    if (!conv) continue;
    ++convs;
    const Shape in = g.shape(node.inputs.at(0));
    for (const OpTypes& types : layer_types()) {
      for (Layout layout : layouts_for(types.data)) {
        ConvDesc d = conv->describe(in, types);
        d.layout = layout;
        with_bias += d.bias;  // the forward graph then ends in the bias epilogue
        SCOPED_TRACE(node.name + " " + op_types_str(types) + " " +
                     std::string(layout_name(layout)));
        const ConvGraphs graphs(d, nullptr);  // throws with cuDNN's message if refused
        EXPECT_EQ(graphs.output_dims(ConvPass::kForward), dims(node.shape));
        EXPECT_EQ(graphs.output_dims(ConvPass::kBackwardData), dims(in));
        EXPECT_EQ(graphs.output_dims(ConvPass::kBackwardFilter),
                  (std::vector<int64_t>{d.out_channels, d.in_channels / d.groups, d.kernel_h,
                                        d.kernel_w}));
      }
    }
  }
  EXPECT_GT(convs, 0);
  // torchvision: AlexNet's and VGG-16's convolutions have biases, the ResNets' none.
  const bool biased = GetParam().model == "alexnet" || GetParam().model == "vgg16";
  EXPECT_EQ(with_bias > 0, biased || GetParam().model == "digits-cnn") << with_bias;
}

TEST_P(LibraryCalls, EveryBatchNormGraphIsAcceptedByCudnn) {
  const Graph g = graph();
  for (const auto& node : g.nodes()) {
    const auto* bn = dynamic_cast<const BatchNorm*>(node.layer.get());
    if (!bn) continue;
    const Shape in = g.shape(node.inputs.at(0));
    SCOPED_TRACE(node.name);
    const int64_t inner = in.numel() / (in[0] * in[1]);
    // Plain, and with the ReLU that the graph fuses into a batch norm it follows.
    for (DType data : kStorage) {
      for (Layout layout : layouts_for(data)) {
        for (bool relu : {false, true}) {
          SCOPED_TRACE(fmt::format("{} {} relu {}", dtype_name(data), layout_name(layout), relu));
          const BatchNormGraphs graphs(in[0], in[1], inner, 1, data, layout, bn->eps(), relu,
                                       nullptr);
          const std::vector<int64_t> expected{in[0], in[1], inner, 1};
          EXPECT_EQ(graphs.forward_output_dims(), expected);
          EXPECT_EQ(graphs.backward_output_dims(), expected);
        }
      }
    }
  }
}

// Linear layers call matmul three times: y = x w^T, dx = dy w, dw = dy^T x (linear.cpp). The
// layouts are cuBLASLt's column-major view of our row-major operands: its A is our b, its B our
// a, and C is [n, m] with leading dimension n.
TEST_P(LibraryCalls, EveryLinearLayerHasValidCublasLtLayouts) {
  const Graph g = graph();
  for (const auto& node : g.nodes()) {
    if (!dynamic_cast<const Linear*>(node.layer.get())) continue;
    SCOPED_TRACE(node.name);
    const Shape x = g.shape(node.inputs.at(0)), y = node.shape;
    const Shape w{y[1], x[1]};
    struct Call {
      bool ta, tb;
      Shape a, b, c;
    };
    for (const Call& call :
         {Call{false, true, x, w, y}, Call{false, false, y, w, x}, Call{true, false, y, x, w}}) {
      const MatmulShape s = matmul_shape(call.ta, call.tb, call.a, call.b, call.c);
      for (const OpTypes& types : layer_types()) {
        SCOPED_TRACE(op_types_str(types));
        const bool tf32 = types.math == Precision::kTf32;
        const MatmulLayouts l(s, matmul_types(types.data, types.math));
        EXPECT_EQ(l.compute_type(), tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
        const cudaDataType_t stored = types.data == DType::kF32   ? CUDA_R_32F
                                      : types.data == DType::kF16 ? CUDA_R_16F
                                                                  : CUDA_R_16BF;
        for (auto layout : {l.lt_a(), l.lt_b(), l.lt_c()}) EXPECT_EQ(l.data_type(layout), stored);
        EXPECT_EQ(l.lt_transposes_a(), call.tb);
        EXPECT_EQ(l.lt_transposes_b(), call.ta);
        const LayoutInfo c = l.info(l.lt_c());
        EXPECT_EQ(c.rows, static_cast<uint64_t>(s.n));
        EXPECT_EQ(c.cols, static_cast<uint64_t>(s.m));
        EXPECT_EQ(c.ld, s.n);
        // op(A) of cuBLASLt is n x k; op(B) is k x m.
        const LayoutInfo a = l.info(l.lt_a()), b = l.info(l.lt_b());
        EXPECT_EQ(call.tb ? a.cols : a.rows, static_cast<uint64_t>(s.n));
        EXPECT_EQ(call.tb ? a.rows : a.cols, static_cast<uint64_t>(s.k));
        EXPECT_EQ(call.ta ? b.cols : b.rows, static_cast<uint64_t>(s.k));
        EXPECT_EQ(call.ta ? b.rows : b.cols, static_cast<uint64_t>(s.m));
        EXPECT_EQ(a.ld, static_cast<int64_t>(a.rows));
        EXPECT_EQ(b.ld, static_cast<int64_t>(b.rows));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, LibraryCalls, ::testing::ValuesIn(cases()), [](const auto& info) {
  std::string name = info.param.model;
  std::replace(name.begin(), name.end(), '-', '_');
  return name + "_" + std::to_string(info.param.image_size);
});

// The heuristic's preference: the workspace limit, and split-K reductions in f32 only (never in
// the 16-bit output type, never by atomics into the output), read back from cuBLASLt.
TEST(LibraryCalls, MatmulPreferenceKeepsReductionsInTheComputeType) {
  cublasLtMatmulPreference_t pref = matmul_preference(size_t{32} << 20);
  uint32_t schemes = 0;
  uint64_t limit = 0;
  size_t written = 0;
  ASSERT_EQ(cublasLtMatmulPreferenceGetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                 &schemes, sizeof(schemes), &written),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulPreferenceGetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &limit, sizeof(limit), &written),
            CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulPreferenceDestroy(pref);
  EXPECT_EQ(schemes, CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE);
  EXPECT_EQ(schemes & CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE, 0u);
  EXPECT_EQ(schemes & CUBLASLT_REDUCTION_SCHEME_INPLACE, 0u);
  EXPECT_EQ(limit, uint64_t{32} << 20);
}

TEST(LibraryCallsRefuse, ACudnnGraphWithMismatchedChannelsIsRefused) {
  // Two groups over three input channels: the filter has one channel per group, and cuDNN's
  // finalize refuses the graph (the backend's own check would catch this earlier; here cuDNN is
  // shown to be checking).
  ConvDesc d;
  d.batch = 2;
  d.in_channels = 3;
  d.height = d.width = 8;
  d.out_channels = 4;
  d.kernel_h = d.kernel_w = 3;
  d.groups = 2;
  EXPECT_THROW(ConvGraphs(d, nullptr), InvalidArgument);
}

TEST(LibraryCallsRefuse, TensorOpMathIsTf32OnF32DataOnly) {
  EXPECT_THROW(matmul_types(DType::kF16, Precision::kTf32), Unsupported);
  EXPECT_THROW(matmul_types(DType::kBF16, Precision::kTf32), Unsupported);
  EXPECT_THROW(matmul_types(DType::kI64, Precision::kFp32), Unsupported);
  EXPECT_EQ(matmul_types(DType::kBF16, Precision::kBf16).compute, CUBLAS_COMPUTE_32F);
}

TEST(LibraryCallsRefuse, MatmulShapesThatDisagreeAreRefused) {
  EXPECT_THROW(matmul_shape(false, true, Shape{4, 3}, Shape{5, 2}, Shape{4, 5}), InvalidArgument);
  EXPECT_THROW(matmul_shape(false, false, Shape{4, 3}, Shape{3, 5}, Shape{4, 6}), InvalidArgument);
  EXPECT_EQ(matmul_shape(true, false, Shape{3, 4}, Shape{3, 5}, Shape{4, 5}),
            (MatmulShape{true, false, 4, 5, 3}));
}

}  // namespace
}  // namespace dlb::cuda
