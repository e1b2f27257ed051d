// Convolution weights stored in oneDNN's blocks (Layout::kOIhw16i16o, the CPU's for f32 weights
// whose channels fill blocks of 16): the index arithmetic is oneDNN's own, every algorithm's
// passes compute the same bits as on KCRS weights, and a model trains bit for bit as with KCRS
// weights, its state_dict in torchvision's order either way.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/backend/cpu/conv_im2col.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/onednn_engine.h"
#include "runtime/check/reference.h"
#include "runtime/core/error.h"
#include "runtime/core/layout_order.h"
#include "runtime/core/rng.h"
#include "runtime/nn/layers/batch_norm.h"
#include "runtime/nn/layers/conv2d.h"
#include "runtime/nn/layers/elementwise.h"
#include "runtime/nn/layers/linear.h"
#include "runtime/train/trainer.h"
#include "workloads/data/dataset.h"

namespace dlb {
namespace {

std::vector<uint8_t> bytes_of(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<float> floats_of(const std::vector<uint8_t>& b) {
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

const Shape kOrderShape{32, 48, 3, 2};

// Each element's logical index as its value (kOrderShape, KCRS), and oneDNN's own reorder of
// them into `tag`.
std::vector<float> logical_indices() {
  std::vector<float> logical(static_cast<size_t>(kOrderShape.numel()));
  std::iota(logical.begin(), logical.end(), 0.f);
  return logical;
}
std::vector<float> onednn_order(dnnl::memory::format_tag tag) {
  std::vector<float> logical = logical_indices(), theirs(logical.size());
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const dnnl::memory::dims dims{32, 48, 3, 2};
  const auto f32 = dnnl::memory::data_type::f32;
  dnnl::memory plain({dims, f32, dnnl::memory::format_tag::oihw}, engine, logical.data());
  dnnl::memory stored({dims, f32, tag}, engine, theirs.data());
  dnnl::reorder(plain, stored).execute(stream, plain, stored);
  stream.wait();
  return theirs;
}

// Our offsets against oneDNN's OIhw16i16o reorder, both ways, and relaid into NHWC.
TEST(LayoutOrder, BlockedOffsetsAreOnednnsOIhw16i16o) {
  const Shape& s = kOrderShape;
  const std::vector<float> logical = logical_indices();
  const std::vector<float> ours =
      floats_of(to_stored_order(Layout::kOIhw16i16o, s, sizeof(float), bytes_of(logical)));
  EXPECT_EQ(ours, onednn_order(dnnl::memory::format_tag::OIhw16i16o));
  EXPECT_EQ(floats_of(to_logical_order(Layout::kOIhw16i16o, s, sizeof(float), bytes_of(ours))),
            logical);
  std::vector<float> relaid(logical.size());
  relayout_floats(s, Layout::kOIhw16i16o, ours.data(), Layout::kNHWC, relaid.data());
  EXPECT_EQ(relaid[static_cast<size_t>(stored_offset(Layout::kNHWC, s, 17, 33, 2, 1))],
            logical[static_cast<size_t>(stored_offset(Layout::kNCHW, s, 17, 33, 2, 1))]);
}

// The same for the bf16 convolutions' order, OIhw8i16o2i.
TEST(LayoutOrder, PairedOffsetsAreOnednnsOIhw8i16o2i) {
  EXPECT_EQ(floats_of(to_stored_order(Layout::kOIhw8i16o2i, kOrderShape, sizeof(float),
                                      bytes_of(logical_indices()))),
            onednn_order(dnnl::memory::format_tag::OIhw8i16o2i));
  EXPECT_TRUE(is_blocked(Layout::kOIhw8i16o2i));
  EXPECT_FALSE(layout_holds(Layout::kOIhw8i16o2i, Shape{16, 24, 3, 3}));
}

TEST(LayoutOrder, BlocksHoldOnlyChannelsThatFillThem) {
  EXPECT_TRUE(layout_holds(Layout::kOIhw16i16o, Shape{16, 32, 1, 1}));
  EXPECT_FALSE(layout_holds(Layout::kOIhw16i16o, Shape{16, 24, 3, 3}));
  EXPECT_FALSE(layout_holds(Layout::kOIhw16i16o, Shape{64, 3, 7, 7}));
  EXPECT_FALSE(layout_holds(Layout::kOIhw16i16o, Shape{16, 16}));
  EXPECT_THROW(to_stored_order(Layout::kOIhw16i16o, Shape{16, 24, 1, 1}, 4,
                               std::vector<uint8_t>(16 * 24 * 4)),
               InvalidArgument);
  EXPECT_THROW(to_stored_order(Layout::kNCHW, Shape{2, 2}, 4, std::vector<uint8_t>(12)),
               InvalidArgument);
}

// resnet50's layer3 bottleneck 3x3 at 64 px, batch 2 (stride 1, so Winograd has it too).
ConvDesc layer(Layout weights) {
  ConvDesc d;
  d.batch = 2, d.in_channels = 32, d.height = d.width = 8, d.out_channels = 48;
  d.kernel_h = d.kernel_w = 3, d.pad_h = d.pad_w = 1;
  d.weight_layout = d.grad_layout = weights;
  return d;
}

struct Passes {
  std::vector<float> x, w, dy;          // the operands drawn, in logical order
  std::vector<float> y, dx, dw;         // dw in logical order
  std::vector<std::string> algorithms;  // per pass, as the plan names them
};

// The --conv-algo that names the algorithm a plan says it runs.
ConvAlgoChoice named(const std::string& algorithm) {
  if (algorithm.rfind("im2col+matmul", 0) == 0) return ConvAlgoChoice::kMatmul;
  if (algorithm.rfind("im2col", 0) == 0) return ConvAlgoChoice::kIm2col;
  return algorithm.find("wino") != std::string::npos ? ConvAlgoChoice::kWinograd
                                                     : ConvAlgoChoice::kOnednn;
}

Tensor filled(CpuBackend& b, const Shape& s, const std::vector<float>& v) {
  Tensor t = b.empty(s, DType::kF32, MemCategory::kActivations, "operand");
  b.copy_from_host(v.data(), t);
  return t;
}

std::vector<float> host(CpuBackend& b, const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  b.copy_to_host(t, v.data());
  return v;
}

// The three passes of `how` on random operands, the weights stored as `weights` says (and their
// gradient as `grads`, if given); with `one_image`, in the least workspace im2col runs in (one
// image per chunk: the weight gradient summed over chunks).
Passes run(ConvAlgoChoice how, Layout weights, bool one_image = false,
           ConvDesc d = layer(Layout::kNCHW), std::optional<Layout> grads = std::nullopt) {
  d.weight_layout = weights;
  d.grad_layout = grads.value_or(weights);
  BackendOptions o;
  o.conv_algo = how;
  if (one_image) o.workspace_limit = Im2colConv::min_workspace_bytes(d);
  CpuBackend b(o);
  const auto plan = b.make_conv_plan(d);
  const Shape xs{d.batch, d.in_channels, d.height, d.width};
  const Shape ys{d.batch, d.out_channels, d.out_h(), d.out_w()};
  const Shape ws{d.out_channels, d.in_channels, d.kernel_h, d.kernel_w};
  Rng rng(11);
  auto draw = [&](const Shape& s) {
    std::vector<float> v(static_cast<size_t>(s.numel()));
    for (float& e : v) e = rng.normal(0.f, 1.f);
    return v;
  };
  const std::vector<float> xv = draw(xs), wv = draw(ws), dyv = draw(ys);
  Tensor x = filled(b, xs, xv), dy = filled(b, ys, dyv);
  Tensor w =
      filled(b, ws, floats_of(to_stored_order(weights, ws, 4, bytes_of(wv)))).with_layout(weights);
  Tensor y = b.empty(ys, DType::kF32, MemCategory::kActivations, "y");
  Tensor dx = b.empty(xs, DType::kF32, MemCategory::kActivations, "dx");
  Tensor dw = b.empty(ws, DType::kF32, MemCategory::kGradients, "dw").with_layout(d.grad_layout);
  b.conv_forward(*plan, x, w, y);
  b.conv_backward_data(*plan, dy, w, dx);
  b.conv_backward_filter(*plan, x, dy, dw);
  std::vector<std::string> algorithms;
  for (const PassAlgorithm& a : plan->algorithms()) algorithms.push_back(a.algorithm);
  return {xv,          wv,
          dyv,         host(b, y),
          host(b, dx), floats_of(to_logical_order(d.grad_layout, ws, 4, bytes_of(host(b, dw)))),
          algorithms};
}

HostArray array(const Shape& s, const std::vector<float>& v) {
  HostArray a(s);
  for (size_t i = 0; i < v.size(); ++i) a.v[i] = v[i];
  return a;
}

void expect_within(const Expected& e, const std::vector<float>& got, const char* what) {
  ASSERT_EQ(got.size(), e.want.v.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::fabs(got[i] - e.want.v[i]), e.bound[i]) << what << " " << i;
  }
}

// The passes of `p` (run on layer `d`) within the bound of sums of f32 products of the float64
// answer.
void expect_products_within_bound(const Passes& p, const ConvDesc& d) {
  Arithmetic a;
  a.math = a.ops = a.data = 0x1p-24;
  const HostArray x = array({d.batch, d.in_channels, d.height, d.width}, p.x),
                  w = array({d.out_channels, d.in_channels, d.kernel_h, d.kernel_w}, p.w),
                  dy = array({d.batch, d.out_channels, d.out_h(), d.out_w()}, p.dy);
  expect_within(ref_conv_forward(d, x, w, nullptr, a), p.y, "y");
  expect_within(ref_conv_backward_data(d, dy, w, a), p.dx, "dx");
  expect_within(ref_conv_backward_filter(d, x, dy, a), p.dw, "dw");
}

// im2col reads blocked weights 16 channels at a time: each output sums the same products in the
// same order, but OpenBLAS may take another kernel for a 16-row GEMM than for the whole one (its
// small-matrix path, or K split into blocks), so the sums may round otherwise, on some CPUs even
// short ones (this layer's 288 products on an AMD EPYC of family 26, 2026-12-01). Each layout's
// im2col passes are held to the sums-of-products bound of the float64 answer instead of each
// other's bits.
void expect_im2col_within_bound(const Passes& kcrs, const Passes& other, const ConvDesc& d) {
  expect_products_within_bound(kcrs, d);
  expect_products_within_bound(other, d);
}

TEST(BlockedWeights, EveryAlgorithmComputesTheBitsOfKcrsWeights) {
  for (ConvAlgoChoice how : {ConvAlgoChoice::kOnednn, ConvAlgoChoice::kWinograd,
                             ConvAlgoChoice::kHeuristic, ConvAlgoChoice::kAuto}) {
    const Passes kcrs = run(how, Layout::kNCHW), blocked = run(how, Layout::kOIhw16i16o);
    EXPECT_EQ(blocked.y, kcrs.y) << conv_algo_choice_name(how);
    EXPECT_EQ(blocked.dx, kcrs.dx) << conv_algo_choice_name(how);
    EXPECT_EQ(blocked.dw, kcrs.dw) << conv_algo_choice_name(how);
  }
  for (bool one_image : {false, true}) {
    expect_im2col_within_bound(run(ConvAlgoChoice::kIm2col, Layout::kNCHW, one_image),
                               run(ConvAlgoChoice::kIm2col, Layout::kOIhw16i16o, one_image),
                               layer(Layout::kNCHW));
  }
  // Autotuning times each pass's candidates on blocked weights; each pass then computes the bits
  // its algorithm computes on KCRS weights.
  // A pass autotuning gives im2col is held to the bound instead (OpenBLAS's 16-row GEMMs, above).
  const Passes tuned = run(ConvAlgoChoice::kAutotune, Layout::kOIhw16i16o);
  ASSERT_EQ(tuned.algorithms.size(), 3u);
  if (std::find_if(tuned.algorithms.begin(), tuned.algorithms.end(), [](const std::string& a) {
        return named(a) == ConvAlgoChoice::kIm2col;
      }) != tuned.algorithms.end()) {
    expect_products_within_bound(tuned, layer(Layout::kNCHW));
  } else {
    EXPECT_EQ(tuned.y, run(named(tuned.algorithms[0]), Layout::kNCHW).y) << tuned.algorithms[0];
    EXPECT_EQ(tuned.dx, run(named(tuned.algorithms[1]), Layout::kNCHW).dx) << tuned.algorithms[1];
    EXPECT_EQ(tuned.dw, run(named(tuned.algorithms[2]), Layout::kNCHW).dw) << tuned.algorithms[2];
  }
}

// Weights read in pairs (a bf16 compute copy's order) and their gradient written in the
// masters' blocks: each algorithm computes the bits it computes on KCRS weights (in f32 here, so
// on any AVX-512 CPU), but im2col its passes within the bound (above).
TEST(BlockedWeights, PairedWeightsWithBlockedGradientsComputeTheBitsOfKcrsWeights) {
  for (ConvAlgoChoice how :
       {ConvAlgoChoice::kOnednn, ConvAlgoChoice::kWinograd, ConvAlgoChoice::kIm2col}) {
    for (bool one_image : {false, true}) {
      if (one_image && how != ConvAlgoChoice::kIm2col) continue;
      const Passes kcrs = run(how, Layout::kNCHW, one_image);
      const Passes paired =
          run(how, Layout::kOIhw8i16o2i, one_image, layer(Layout::kNCHW), Layout::kOIhw16i16o);
      if (how == ConvAlgoChoice::kIm2col) {  // OpenBLAS's 16-row GEMMs (above)
        expect_im2col_within_bound(kcrs, paired, layer(Layout::kNCHW));
        continue;
      }
      EXPECT_EQ(paired.y, kcrs.y) << conv_algo_choice_name(how);
      EXPECT_EQ(paired.dx, kcrs.dx) << conv_algo_choice_name(how);
      EXPECT_EQ(paired.dw, kcrs.dw) << conv_algo_choice_name(how);
    }
  }
}

// cast rounds an f32 master in blocks into its 16-bit copy in pairs, and the update with a copy
// in pairs gives the master, momentum and copy of the update with a copy in blocks, relaid: on a
// weight large enough to be split over threads.
TEST(BlockedWeights, CastAndTheUpdateWriteACopyInPairs) {
  const Shape ws{64, 64, 3, 3};
  CpuBackend b({});
  Rng rng(5);
  std::vector<float> w(static_cast<size_t>(ws.numel())), g(w.size()), m(w.size());
  for (auto* v : {&w, &g, &m})
    for (float& e : *v) e = rng.normal(0.f, 1.f);
  for (DType t : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(dtype_name(t));
    const auto tensor = [&](const std::vector<float>& v, DType type, Layout layout) {
      Tensor f =
          filled(b, ws, floats_of(to_stored_order(layout, ws, 4, bytes_of(v)))).with_layout(layout);
      if (type == DType::kF32) return f;
      Tensor out = b.empty(ws, type, MemCategory::kWeights, "16-bit", layout);
      b.cast(f, out);
      return out;
    };
    const auto logical = [&](const Tensor& x) {
      std::vector<uint8_t> bytes(x.bytes());
      b.copy_to_host(x, bytes.data());
      return to_logical_order(x.layout(), ws, dtype_size(x.dtype()), bytes);
    };
    const Tensor master = tensor(w, DType::kF32, Layout::kOIhw16i16o);
    Tensor paired = b.empty(ws, t, MemCategory::kWeights, "copy", Layout::kOIhw8i16o2i);
    b.cast(master, paired);
    EXPECT_EQ(logical(paired), logical(tensor(w, t, Layout::kNCHW)));
    Tensor p[2] = {tensor(w, DType::kF32, Layout::kOIhw16i16o),
                   tensor(w, DType::kF32, Layout::kOIhw16i16o)};
    Tensor mom[2] = {tensor(m, DType::kF32, Layout::kOIhw16i16o),
                     tensor(m, DType::kF32, Layout::kOIhw16i16o)};
    Tensor copy[2] = {b.empty(ws, t, MemCategory::kWeights, "copy", Layout::kOIhw16i16o),
                      b.empty(ws, t, MemCategory::kWeights, "copy", Layout::kOIhw8i16o2i)};
    const Tensor grad = tensor(g, t, Layout::kOIhw16i16o);
    for (int k = 0; k < 2; ++k) {
      b.sgd_update_with_copy(SgdConfig{0.05f, 0.9f, 1e-4f}, grad, nullptr, mom[k], p[k], copy[k]);
    }
    EXPECT_EQ(logical(copy[1]), logical(copy[0]));
    EXPECT_EQ(logical(p[1]), logical(p[0]));
    EXPECT_EQ(logical(mom[1]), logical(mom[0]));
    EXPECT_NE(logical(p[0]), logical(master));  // the update moved the weights
  }
}

// The same on resnet's layer4 3x3 at half its channels (2,304 products over 4 pixels, one image
// per chunk).
TEST(BlockedWeights, Im2colsRelayOfLongSumsIsWithinTheProductsBound) {
  ConvDesc d = layer(Layout::kNCHW);
  d.in_channels = d.out_channels = 256, d.height = d.width = 2;
  expect_im2col_within_bound(run(ConvAlgoChoice::kIm2col, Layout::kNCHW, true, d),
                             run(ConvAlgoChoice::kIm2col, Layout::kOIhw16i16o, true, d), d);
}

// Under a workspace limit that holds no copy of the weights (resnet18's layer4 3x3: 9 MiB of
// them), a pass that must reorder them (oneDNN's backward-data) gives way to im2col, which reads
// blocked weights 16 channels at a time: one image's columns and that relay fit.
TEST(BlockedWeights, ALimitBelowTheWeightsStillFitsIm2colsRelay) {
  ConvDesc d;
  d.batch = 2, d.in_channels = d.out_channels = 512, d.height = d.width = 2;
  d.kernel_h = d.kernel_w = 3, d.pad_h = d.pad_w = 1;
  d.weight_layout = d.grad_layout = Layout::kOIhw16i16o;
  BackendOptions o;
  o.workspace_limit = size_t{1} << 20;
  CpuBackend b(o);
  const auto plan = b.make_conv_plan(d);
  EXPECT_LE(plan->workspace_bytes(), *o.workspace_limit);
  EXPECT_EQ(plan->algorithms()[1].algorithm.rfind("im2col", 0), 0u)
      << plan->algorithms()[1].algorithm;
}

TEST(BlockedWeights, APlanRefusesBlocksTheWeightsCannotFill) {
  CpuBackend b({});
  ConvDesc d = layer(Layout::kOIhw16i16o);
  d.in_channels = 24;
  EXPECT_THROW(b.make_conv_plan(d), InvalidArgument);
  d = layer(Layout::kOIhw16i16o);
  d.groups = 2;
  EXPECT_THROW(b.make_conv_plan(d), InvalidArgument);
}

TEST(BlockedWeights, APassRefusesWeightsStoredOtherwiseThanItsPlan) {
  CpuBackend b({});
  const ConvDesc d = layer(Layout::kOIhw16i16o);
  const auto plan = b.make_conv_plan(d);
  Tensor x = b.empty({2, 32, 8, 8}, DType::kF32, MemCategory::kActivations, "x");
  Tensor y = b.empty({2, 48, 8, 8}, DType::kF32, MemCategory::kActivations, "y");
  Tensor kcrs = b.empty({48, 32, 3, 3}, DType::kF32, MemCategory::kWeights, "w");
  EXPECT_THROW(b.conv_forward(*plan, x, kcrs, y), InvalidArgument);
}

// The CPU, but keeping every weight in torchvision's KCRS (fusing as the CPU does).
class KcrsBackend final : public CpuBackend {
 public:
  KcrsBackend() : CpuBackend(BackendOptions{}) {}
  bool blocks_conv_weights(const OpTypes&) const override { return false; }
};

// 3 -> 16 channels (KCRS: 3 does not fill a block), then 16 -> 32 and 32 -> 32 (blocked).
Graph blockable_graph() {
  Graph g(Shape{2, 3, 8, 8});
  int x = g.add("conv1", std::make_unique<Conv2d>(Conv2dOptions{3, 16, 3, 1, 1}), {0});
  x = g.add("bn1", std::make_unique<BatchNorm>(16), {x});
  x = g.add("relu1", std::make_unique<Relu>(), {x});
  Conv2dOptions plain{16, 32, 3, 2, 1};
  plain.bias = false;
  x = g.add("conv2", std::make_unique<Conv2d>(plain), {x});
  x = g.add("relu2", std::make_unique<Relu>(), {x});
  x = g.add("conv3", std::make_unique<Conv2d>(Conv2dOptions{32, 32, 1}), {x});
  x = g.add("flatten", std::make_unique<Flatten>(), {x});
  g.add("fc", std::make_unique<Linear>(32 * 4 * 4, 10), {x});
  return g;
}

struct Trained {
  std::vector<float> losses;
  StateDict initial, trained;
  std::vector<Layout> weight_layouts;
  std::vector<TensorInfo> tensors;  // the model's
};

Trained train(Backend& b, SgdConfig sgd, Precision precision) {
  Graph g = blockable_graph();
  Rng rng(7);
  g.declare_for(b, PrecisionPolicy::for_precision(precision));
  TrainConfig tc;
  tc.sgd = sgd;
  Trainer t(b, g, tc, rng);
  Trained out;
  out.initial = g.state_dict();
  const Dataset d = make_synthetic(2, 3, 8, 10, 4);
  t.load_batch(d.images.data(), d.labels.data());
  for (int s = 0; s < 3; ++s) t.step();
  out.losses = t.take_losses();
  out.trained = g.state_dict();
  out.tensors = g.tensor_infos();
  for (const char* conv : {"conv1", "conv2", "conv3"}) {
    for (const TensorInfo& info : g.tensor_infos()) {
      if (info.name == std::string(conv) + ".weight") out.weight_layouts.push_back(info.layout);
    }
  }
  return out;
}

void expect_same_state(const StateDict& a, const StateDict& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_EQ(b.count(name), 1u) << name;
    EXPECT_EQ(t.shape, b.at(name).shape) << name;
    EXPECT_EQ(t.bytes, b.at(name).bytes) << name;
  }
}

// In bf16 the f32 master, its momentum, the bf16 compute copy and the bf16 gradient are all
// blocked (the update is element for element); in fp16 the convolutions compute on f32 views of
// blocked tensors.
TEST(BlockedWeights, AModelTrainsBitForBitAsWithKcrsWeights) {
  const SgdConfig sgd{0.05f, 0.9f, 1e-4f};
  for (Precision precision : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
    CpuBackend cpu({});
    KcrsBackend kcrs;
    const Trained blocked = train(cpu, sgd, precision), plain = train(kcrs, sgd, precision);
    const std::string_view name = precision_name(precision);
    EXPECT_EQ(blocked.weight_layouts,
              (std::vector<Layout>{Layout::kNCHW, Layout::kOIhw16i16o, Layout::kOIhw16i16o}))
        << name;
    EXPECT_EQ(plain.weight_layouts, std::vector<Layout>(3, Layout::kNCHW)) << name;
    EXPECT_EQ(blocked.losses, plain.losses) << name;
    expect_same_state(blocked.initial, plain.initial);  // drawn in torchvision's order
    expect_same_state(blocked.trained, plain.trained);
    // The weight, its gradient and momentum in blocks; a bf16 copy, where the CPU multiplies
    // bf16, in the pairs its convolutions read (conv_weight_copy_layout).
    const bool pairs = precision == Precision::kBf16 && cpu_multiplies_bf16();
    int copies = 0;
    for (const TensorInfo& info : blocked.tensors) {
      if (info.name.rfind("conv2.weight", 0) != 0) continue;
      const bool copy = info.name.find("compute copy") != std::string::npos;
      copies += copy;
      EXPECT_EQ(info.layout, copy && pairs ? Layout::kOIhw8i16o2i : Layout::kOIhw16i16o)
          << name << " " << info.name;
    }
    EXPECT_EQ(copies, precision == Precision::kFp32 ? 0 : 1) << name;
  }
}

// A state_dict (torchvision's order) loaded into blocked weights reads back as it was.
TEST(BlockedWeights, AStateDictLoadsAndSavesInTorchvisionsOrder) {
  KcrsBackend kcrs;
  Graph source = blockable_graph();
  Rng rng(21);
  source.setup(kcrs, rng);
  const StateDict state = source.state_dict();
  CpuBackend cpu({});
  Graph g = blockable_graph();
  Rng other(22);
  g.setup(cpu, other);
  g.load_state_dict(state);
  expect_same_state(g.state_dict(), state);
}

}  // namespace
}  // namespace dlb
