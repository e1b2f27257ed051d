// Activations stored channels last (NHWC) on the CPU, the layout of a native bf16 run on a CPU with
// AMX (CpuBackend::activation_layout). Batch norm, the poolings, the bias and the convolutions
// read either layout and give the same bits, so a model trains bit for bit as on NCHW, in either
// 16-bit precision: its channels-last gradients of KCRS weights update them in their order, and the
// output a flatten reads stays NCHW (Graph::output_layout).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/onednn_engine.h"
#include "runtime/core/error.h"
#include "runtime/core/rng.h"
#include "runtime/nn/graph.h"
#include "runtime/train/trainer.h"
#include "workloads/data/dataset.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

// The CPU backend with its activations stored in one layout in every precision, and oneDNN's
// direct convolutions (--conv-algo=onednn) in both: im2col+matmul, which the heuristic gives some
// channels-last layers, sums in another order than a direct convolution.
BackendOptions direct_convolutions() {
  BackendOptions o;
  o.conv_algo = ConvAlgoChoice::kOnednn;
  return o;
}

class CpuIn final : public CpuBackend {
 public:
  explicit CpuIn(Layout layout) : CpuBackend(direct_convolutions()), layout_(layout) {}
  Layout activation_layout(const OpTypes&) const override { return layout_; }

 private:
  Layout layout_;
};

struct Trained {
  std::vector<float> losses;
  StateDict trained;
  int channels_last = 0;  // 4-D tensors of the step stored channels last
};

Trained train(Backend& b, const std::string& model, int64_t size, Precision precision) {
  Graph g = build_model(model, ModelConfig{2, size, 10, {}});
  Rng rng(7);
  g.declare_for(b, PrecisionPolicy::for_precision(precision));
  TrainConfig tc;
  tc.sgd = SgdConfig{0.05f, 0.9f, 1e-4f};
  Trainer t(b, g, tc, rng);
  const Dataset d = make_synthetic(2, 3, size, 10, 4);
  t.load_batch(d.images.data(), d.labels.data());
  for (int s = 0; s < 3; ++s) t.step();
  Trained out{t.take_losses(), g.state_dict()};
  for (const TensorInfo& info : g.tensor_infos()) {
    out.channels_last += info.layout == Layout::kNHWC;
  }
  return out;
}

// resnet18 has batch norm, max pooling and a global average pooling that a flatten reads with one
// pixel; alexnet has biases and an average pooling that a flatten reads with 36 pixels (NCHW). In
// the 16-bit precisions, whose convolutions read compute copies of the weights (channels last, as
// Backend::activation_layout says; an fp32 run's read the KCRS masters, so it stores NCHW).
TEST(CpuChannelsLast, ModelsTrainBitForBitAsOnNchw) {
  for (const auto& [model, size] :
       {std::pair<std::string, int64_t>{"resnet18", 32}, {"alexnet", 63}}) {
    for (Precision precision : {Precision::kBf16, Precision::kFp16}) {
      CpuIn last(Layout::kNHWC), nchw(Layout::kNCHW);
      const Trained a = train(last, model, size, precision),
                    b = train(nchw, model, size, precision);
      const std::string what = model + " " + std::string(precision_name(precision));
      EXPECT_GT(a.channels_last, 0) << what;
      EXPECT_EQ(b.channels_last, 0) << what;
      EXPECT_EQ(a.losses, b.losses) << what;
      ASSERT_EQ(a.trained.size(), b.trained.size()) << what;
      for (const auto& [name, t] : a.trained) {
        EXPECT_EQ(t.bytes, b.trained.at(name).bytes) << what << " " << name;
      }
    }
  }
}

// Every pooling on channels-last tensors, into a channels-last or an NCHW output, gives the bits of
// NCHW's, forward and backward: on ties (small integers) and NaNs (max pooling's rule: a NaN
// takes the window, the last one its gradient), in f32 and bf16.
class CpuChannelsLastPooling : public ::testing::Test {
 protected:
  Tensor make(const Shape& s, DType t, Layout layout, uint64_t seed, bool nans) {
    Rng rng(seed);
    std::vector<float> v(static_cast<size_t>(s.numel()));
    for (float& x : v) x = static_cast<float>(static_cast<int>(rng.next_u64() % 5) - 2);
    if (nans) v[3] = v[40] = v[41] = std::nanf("");
    Tensor f = b.empty(s, DType::kF32, MemCategory::kActivations, "f32");
    b.copy_from_host(v.data(), f);
    return in(f, t, layout);
  }
  // `t` as type `type` in `layout` (exact: small integers and NaNs).
  Tensor in(const Tensor& t, DType type, Layout layout) {
    Tensor out = b.empty(t.shape(), type, MemCategory::kActivations, "operand", layout);
    b.cast(t, out);
    return out;
  }
  Tensor zeros(const Shape& s, DType t, Layout layout) {
    Tensor z = b.empty(s, t, MemCategory::kActivations, "result", layout);
    b.fill(z, 0.f);
    return z;
  }
  // The bits of `t` in NCHW order, as f32.
  std::vector<uint32_t> bits(const Tensor& t) {
    Tensor f = in(t, DType::kF32, Layout::kNCHW);
    std::vector<uint32_t> v(static_cast<size_t>(t.numel()));
    b.copy_to_host(f, v.data());
    return v;
  }
  CpuBackend b{{}};
};

TEST_F(CpuChannelsLastPooling, EveryPoolingGivesNchwsBits) {
  const Shape xs{2, 19, 9, 8};
  PoolDesc max_pool{PoolMode::kMax, 3, 3, 2, 2, 1, 1};
  PoolDesc avg_pool{PoolMode::kAvg, 3, 2, 2, 1, 1, 0};
  avg_pool.count_include_pad = false;
  for (DType type : {DType::kF32, DType::kBF16}) {
    for (const PoolDesc& p : {max_pool, avg_pool}) {
      const Shape ys{2, 19, (9 + 2 * p.pad_h - p.kernel_h) / p.stride_h + 1,
                     (8 + 2 * p.pad_w - p.kernel_w) / p.stride_w + 1};
      const auto run = [&](Layout x_layout, Layout y_layout) {
        const Tensor x = make(xs, type, x_layout, 1, true), dy = make(ys, type, y_layout, 2, false);
        Tensor y = zeros(ys, type, y_layout), dx = zeros(xs, type, x_layout);
        b.pool_forward(p, x, y);
        b.pool_backward(p, x, y, dy, dx);
        return std::pair{bits(y), bits(dx)};
      };
      const auto nchw = run(Layout::kNCHW, Layout::kNCHW);
      const std::string what =
          std::string(dtype_name(type)) + (p.mode == PoolMode::kMax ? " max" : " average");
      EXPECT_EQ(run(Layout::kNHWC, Layout::kNHWC), nchw) << what;
      EXPECT_EQ(run(Layout::kNHWC, Layout::kNCHW), nchw) << what << " into NCHW";
    }
    const Shape ys{2, 19, 3, 2};
    const auto adaptive = [&](Layout x_layout, Layout y_layout) {
      const Tensor x = make(xs, type, x_layout, 3, false), dy = make(ys, type, y_layout, 4, false);
      Tensor y = zeros(ys, type, y_layout), dx = zeros(xs, type, x_layout);
      b.adaptive_avg_pool_forward(x, y);
      b.adaptive_avg_pool_backward(dy, dx);
      return std::pair{bits(y), bits(dx)};
    };
    EXPECT_EQ(adaptive(Layout::kNHWC, Layout::kNHWC), adaptive(Layout::kNCHW, Layout::kNCHW));
    EXPECT_EQ(adaptive(Layout::kNHWC, Layout::kNCHW), adaptive(Layout::kNCHW, Layout::kNCHW));
  }
}

// A channels-last convolution: resnet's stem shape (3 input channels: KRSC weights, which oneDNN
// does not block), or a blockable one, in `type`.
ConvDesc channels_last_conv(DType type, int64_t in_channels) {
  ConvDesc d;
  d.batch = 2, d.in_channels = in_channels, d.height = d.width = 8, d.out_channels = 32;
  d.kernel_h = d.kernel_w = 3, d.pad_h = d.pad_w = 1;
  d.types.data = d.types.params = type;
  d.types.math = type == DType::kF32 ? Precision::kFp32 : Precision::kBf16;
  d.layout = Layout::kNHWC;
  return d;
}

// autotune times each candidate on operands in the plan's own layouts.
TEST(CpuChannelsLast, AutotunePlansChannelsLastLayers) {
  BackendOptions o;
  o.conv_algo = ConvAlgoChoice::kAutotune;
  for (DType type : {DType::kF32, DType::kBF16}) {
    for (int64_t in_channels : {3, 16}) {
      CpuBackend b(o);
      ConvDesc d = channels_last_conv(type, in_channels);
      describe_weights_as_trained(b, type != DType::kF32, d);
      EXPECT_NO_THROW(b.make_conv_plan(d)) << dtype_name(type) << " " << in_channels;
    }
  }
}

// Under --workspace-limit a plan either fits every pass within it or refuses the layer
// (InvalidArgument, naming what each algorithm needs); on channels-last activations, which im2col
// does not take, too.
TEST(CpuChannelsLast, PlansKeepWithinTheWorkspaceLimit) {
  for (DType type : {DType::kF32, DType::kBF16}) {
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
      for (size_t limit : {size_t{0}, size_t{4} << 10, size_t{64} << 10, size_t{1} << 20}) {
        BackendOptions o;
        o.workspace_limit = limit;
        CpuBackend b(o);
        ConvDesc d = channels_last_conv(type, 16);
        d.layout = layout;
        describe_weights_as_trained(b, type != DType::kF32, d);
        try {
          for (const PassAlgorithm& a : b.make_conv_plan(d)->algorithms()) {
            EXPECT_LE(a.workspace_bytes, limit) << a.algorithm << " " << layout_name(layout);
          }
        } catch (const InvalidArgument& e) {
          EXPECT_NE(std::string(e.what()).find("fits --workspace-limit"), std::string::npos);
        }
      }
    }
  }
}

// A channels-last plan given an NCHW output (a convolution whose output a flatten reads) and its
// NCHW gradient computes the bits of an NCHW plan.
TEST(CpuChannelsLast, ChannelsLastPlanTakesAnNchwOutput) {
  CpuBackend b({});
  const auto values = [&](const Shape& s, uint64_t seed, Layout layout) {
    Rng rng(seed);
    std::vector<float> v(static_cast<size_t>(s.numel()));
    for (float& x : v) x = static_cast<float>(static_cast<int>(rng.next_u64() % 5) - 2);
    Tensor f = b.empty(s, DType::kF32, MemCategory::kActivations, "values");
    b.copy_from_host(v.data(), f);
    Tensor t = b.empty(s, DType::kF32, MemCategory::kActivations, "operand", layout);
    b.cast(f, t);
    return t;
  };
  const auto host = [&](const Tensor& t) {
    Tensor f = b.empty(t.shape(), DType::kF32, MemCategory::kActivations, "nchw");
    b.cast(t, f);
    std::vector<float> v(static_cast<size_t>(t.numel()));
    b.copy_to_host(f, v.data());
    return v;
  };
  const auto run = [&](Layout plan_layout, Layout x_layout, Layout y_layout) {
    ConvDesc d = channels_last_conv(DType::kF32, 16);
    d.layout = plan_layout;
    describe_weights_as_trained(b, false, d);
    const auto plan = b.make_conv_plan(d);
    const Shape xs{2, 16, 8, 8}, ys{2, 32, 8, 8};
    const Tensor x = values(xs, 1, x_layout), dy = values(ys, 2, y_layout);
    Tensor w = values({32, 16, 3, 3}, 3, Layout::kNCHW);
    if (d.weight_layout != Layout::kNCHW)
      w = [&] {
        Tensor blocked =
            b.empty(w.shape(), DType::kF32, MemCategory::kWeights, "w", d.weight_layout);
        b.cast(w, blocked);
        return blocked;
      }();
    Tensor y = values(ys, 4, y_layout), dx = values(xs, 5, x_layout);
    Tensor dw = b.empty(w.shape(), DType::kF32, MemCategory::kWeights, "dw", d.grad_layout);
    b.conv_forward(*plan, x, w, y);
    b.conv_backward_data(*plan, dy, w, dx);
    b.conv_backward_filter(*plan, x, dy, dw);
    return std::vector<std::vector<float>>{host(y), host(dx), host(dw)};
  };
  EXPECT_EQ(run(Layout::kNHWC, Layout::kNHWC, Layout::kNCHW),
            run(Layout::kNCHW, Layout::kNCHW, Layout::kNCHW));
}

// A native bf16 run stores its activations channels last exactly where oneDNN has AMX, but under
// --conv-algo=im2col (whose columns are NCHW's); every other run stores them NCHW.
TEST(CpuChannelsLast, NativeBf16OnAmxOnly) {
  const auto types = [](Precision p) { return OpTypes::of(PrecisionPolicy::for_precision(p)); };
  CpuBackend heuristic({});
  BackendOptions o;
  o.conv_algo = ConvAlgoChoice::kIm2col;
  CpuBackend im2col(o);
  const Layout bf16 =
      native_bf16(types(Precision::kBf16)) && cpu_has_amx() ? Layout::kNHWC : Layout::kNCHW;
  EXPECT_EQ(heuristic.activation_layout(types(Precision::kBf16)), bf16);
  EXPECT_EQ(im2col.activation_layout(types(Precision::kBf16)), Layout::kNCHW);
  for (Precision p : {Precision::kFp32, Precision::kFp16}) {
    EXPECT_EQ(heuristic.activation_layout(types(p)), Layout::kNCHW) << precision_name(p);
  }
}

}  // namespace
}  // namespace dlb
