// The CUDA backend in fp16 and bf16 on a real GPU, against the CPU backend's 16-bit storage (the
// reference), one resnet18 training step in bf16, and steps replayed from a CUDA graph against
// steps op by op. Without a visible GPU the program exits 77 (skipped).
//
// Tolerance, relative to the reference tensor's largest magnitude: 1e-2. Both backends load the
// same 16-bit inputs exactly and accumulate in f32; they differ in summation order (cuDNN and
// cuBLASLt tile their sums; tensor cores may sum a few products before rounding), which moves an
// f32 result by far less than a 16-bit unit, and in where they round to 16 bits: the CPU rounds
// a convolution before adding its bias, cuDNN adds it in the epilogue first. So an output element
// may land one 16-bit unit away (bf16: 2^-8 = 3.9e-3 relative to the element, fp16 2^-11), or two
// where two roundings stack: 1e-2 of the scale allows that for bf16 with room, and still catches
// a wrong layout, transpose, type or mask, which moves results by the scale itself.
// Our own kernels round exactly as the CPU backend does (tests/unit/cuda_kernel_math_16bit_test.cpp
// checks them bit for bit on the host); they share the tolerance here for simplicity.
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/core/half.h"
#include "runtime/core/rng.h"
#include "runtime/train/trainer.h"
#include "tests/channels_last_bytes.h"
#include "tests/gpu/skip_without_gpu.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

constexpr double kRel = 1e-2;

class CudaSixteenBit : public ::testing::TestWithParam<Precision> {
 protected:
  DType data() const { return GetParam() == Precision::kFp16 ? DType::kF16 : DType::kBF16; }
  OpTypes types() const { return OpTypes{GetParam(), data(), data()}; }
  // A 3x3 convolution with a bias, 16 -> 32 channels on 4 x 14 x 14, in this precision.
  ConvDesc small_conv() const {
    ConvDesc d;
    d.batch = 4;
    d.in_channels = 16;
    d.height = d.width = 14;
    d.out_channels = 32;
    d.kernel_h = d.kernel_w = 3;
    d.pad_h = d.pad_w = 1;
    d.bias = true;
    d.types = types();
    return d;
  }
  // Random values stored as `dtype` on the host (the CPU backend's tensors).
  Tensor host(const Shape& s, DType dtype, float lo = -1.f, float hi = 1.f) {
    Tensor wide = cpu.empty(s, DType::kF32, MemCategory::kActivations, "host");
    for (int64_t i = 0; i < wide.numel(); ++i) wide.data<float>()[i] = rng.uniform(lo, hi);
    Tensor t = cpu.empty(s, dtype, MemCategory::kActivations, "host");
    cpu.cast(wide, t);
    return t;
  }
  Tensor host(const Shape& s, float lo = -1.f, float hi = 1.f) { return host(s, data(), lo, hi); }
  Tensor host_zeros(const Shape& s, DType dtype) {
    Tensor t = cpu.empty(s, dtype, MemCategory::kActivations, "host");
    cpu.fill(t, 0.f);
    return t;
  }
  Tensor host_zeros(const Shape& s) { return host_zeros(s, data()); }
  Tensor device(const Tensor& h) {
    Tensor d = gpu->empty(h.shape(), h.dtype(), MemCategory::kActivations, "device");
    gpu->copy_from_host(h.raw(), d);
    return d;
  }
  Tensor device_zeros(const Shape& s, DType dtype) { return device(host_zeros(s, dtype)); }
  Tensor device_zeros(const Shape& s) { return device_zeros(s, data()); }
  static std::vector<float> floats(const void* raw, int64_t n, DType dtype) {
    std::vector<float> v(static_cast<size_t>(n));
    dtype_to_floats(raw, n, dtype, v.data());
    return v;
  }
  // max |got - want| / max |want| <= rel, both read as floats from their stored type.
  void expect_close(const Tensor& got_device, const Tensor& want_host, const char* what,
                    double rel = kRel) {
    ASSERT_EQ(got_device.dtype(), want_host.dtype()) << what;
    std::vector<uint8_t> raw(got_device.bytes());
    gpu->copy_to_host(got_device, raw.data());
    const auto got = floats(raw.data(), got_device.numel(), got_device.dtype());
    const auto want = floats(want_host.raw(), want_host.numel(), want_host.dtype());
    double worst = 0, scale = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
      worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
    }
    EXPECT_LE(worst, rel * scale) << what << ": worst difference " << worst << " at scale "
                                  << scale;
  }

  CpuBackend cpu{{}};
  std::unique_ptr<Backend> gpu = make_backend(BackendKind::kCuda, {});
  Rng rng{21};
};

TEST_P(CudaSixteenBit, ConvolutionWithBiasAllThreePasses) {
  ConvDesc d = small_conv();
  const Shape xs{4, 16, 14, 14}, ws{32, 16, 3, 3}, ys{4, 32, 14, 14};
  const Tensor x = host(xs), w = host(ws, -0.2f, 0.2f), b = host({32}), dy = host(ys);
  auto cplan = cpu.make_conv_plan(d);
  auto gplan = gpu->make_conv_plan(d);
  for (const PassAlgorithm& a : gplan->algorithms()) {
    std::printf("%s: %s\n", std::string(conv_pass_name(a.pass)).c_str(), a.algorithm.c_str());
  }
  Tensor y = host_zeros(ys), dx = host_zeros(xs), dw = host_zeros(ws);
  cpu.conv_bias_forward(*cplan, x, w, b, y);
  cpu.conv_backward_data(*cplan, dy, w, dx);
  cpu.conv_backward_filter(*cplan, x, dy, dw);
  Tensor gx = device(x), gw = device(w), gdy = device(dy);
  Tensor gy = device_zeros(ys), gdx = device_zeros(xs), gdw = device_zeros(ws);
  gpu->conv_bias_forward(*gplan, gx, gw, device(b), gy);
  gpu->conv_backward_data(*gplan, gdy, gw, gdx);
  gpu->conv_backward_filter(*gplan, gx, gdy, gdw);
  expect_close(gy, y, "forward with bias");
  expect_close(gdx, dx, "backward-data");
  expect_close(gdw, dw, "backward-filter");
}

TEST_P(CudaSixteenBit, MatmulEveryTransposeTheLinearLayerUses) {
  const Tensor x = host({8, 300}), w = host({10, 300}), dy = host({8, 10});
  Tensor y = host_zeros({8, 10}), dx = host_zeros({8, 300}), dw = host_zeros({10, 300});
  cpu.matmul(GetParam(), false, true, 1.f, x, w, 0.f, y);
  cpu.matmul(GetParam(), false, false, 1.f, dy, w, 0.f, dx);
  cpu.matmul(GetParam(), true, false, 1.f, dy, x, 0.f, dw);
  Tensor gy = device_zeros({8, 10}), gdx = device_zeros({8, 300}), gdw = device_zeros({10, 300});
  gpu->matmul(GetParam(), false, true, 1.f, device(x), device(w), 0.f, gy);
  gpu->matmul(GetParam(), false, false, 1.f, device(dy), device(w), 0.f, gdx);
  gpu->matmul(GetParam(), true, false, 1.f, device(dy), device(x), 0.f, gdw);
  expect_close(gy, y, "x w^T");
  expect_close(gdx, dx, "dy w");
  expect_close(gdw, dw, "dy^T x");
}

// 16-bit data; f32 scale, shift and statistics; 16-bit parameter gradients (through f32 in the
// graph, then a cast).
TEST_P(CudaSixteenBit, BatchNormPlainAndFusedWithReluBothWays) {
  const Shape s{8, 64, 7, 7}, c{64};
  const Tensor x = host(s, -2.f, 3.f), dy = host(s);
  const Tensor gamma = host(c, DType::kF32), beta = host(c, DType::kF32);
  for (bool relu : {false, true}) {
    SCOPED_TRACE(relu ? "with relu" : "plain");
    Tensor rm = host_zeros(c, DType::kF32), rv = host_zeros(c, DType::kF32);
    cpu.fill(rv, 1.f);
    Tensor mean = host_zeros(c, DType::kF32), inv = host_zeros(c, DType::kF32);
    Tensor y = host_zeros(s), dx = host_zeros(s), dg = host_zeros(c), db = host_zeros(c);
    Tensor gx = device(x), gg = device(gamma), gb = device(beta), gdy = device(dy);
    Tensor grm = device(rm), grv = device(rv);
    Tensor gmean = device_zeros(c, DType::kF32), ginv = device_zeros(c, DType::kF32);
    Tensor gy = device_zeros(s), gdx = device_zeros(s), gdg = device_zeros(c),
           gdb = device_zeros(c);
    if (relu) {
      ASSERT_TRUE(gpu->fuses_batch_norm_relu(OpTypes{GetParam(), data(), DType::kF32}));
      cpu.batch_norm_relu_train(x, gamma, beta, rm, rv, mean, inv, y, 0.1f, 1e-5f);
      gpu->batch_norm_relu_train(gx, gg, gb, grm, grv, gmean, ginv, gy, 0.1f, 1e-5f);
      // The mask from the GPU's own output, so an output within rounding of zero cannot take
      // the other side on the two backends.
      Tensor y_gpu = host_zeros(s);
      gpu->copy_to_host(gy, y_gpu.raw());
      cpu.batch_norm_relu_backward(x, y_gpu, dy, gamma, mean, inv, dx, dg, db);
      gpu->batch_norm_relu_backward(gx, gy, gdy, gg, gmean, ginv, gdx, gdg, gdb);
    } else {
      cpu.batch_norm_train(x, gamma, beta, rm, rv, mean, inv, y, 0.1f, 1e-5f);
      gpu->batch_norm_train(gx, gg, gb, grm, grv, gmean, ginv, gy, 0.1f, 1e-5f);
      cpu.batch_norm_backward(x, dy, gamma, mean, inv, dx, dg, db);
      gpu->batch_norm_backward(gx, gdy, gg, gmean, ginv, gdx, gdg, gdb);
    }
    expect_close(gy, y, "y");
    // The statistics are f32 sums of the same exact inputs: f32 reduction-order differences.
    expect_close(gmean, mean, "saved mean", 1e-5);
    expect_close(ginv, inv, "saved 1/sqrt(var + eps)", 1e-5);
    expect_close(grm, rm, "running mean", 1e-5);
    expect_close(grv, rv, "running var", 1e-5);
    expect_close(gdx, dx, "dx");
    expect_close(gdg, dg, "dgamma");
    expect_close(gdb, db, "dbeta");
  }
  Tensor yi = host_zeros(s), gyi = device_zeros(s);
  Tensor rv = host(c, DType::kF32, 0.5f, 2.f), rm = host(c, DType::kF32);
  cpu.batch_norm_infer(x, gamma, beta, rm, rv, yi, 1e-5f);
  gpu->batch_norm_infer(device(x), device(gamma), device(beta), device(rm), device(rv), gyi, 1e-5f);
  expect_close(gyi, yi, "inference");
}

TEST_P(CudaSixteenBit, ElementwisePoolingLossAndUpdate) {
  const Shape s{4, 8, 15, 15}, o{4, 8, 8, 8};
  const Tensor x = host(s), dy = host(o), other = host(s);
  PoolDesc p;
  p.kernel_h = p.kernel_w = 3;
  p.stride_h = p.stride_w = 2;
  p.pad_h = p.pad_w = 1;
  for (PoolMode m : {PoolMode::kMax, PoolMode::kAvg}) {
    p.mode = m;
    Tensor y = host_zeros(o), dx = host_zeros(s);
    cpu.pool_forward(p, x, y);
    cpu.pool_backward(p, x, y, dy, dx);
    Tensor gx = device(x), gy = device_zeros(o), gdx = device_zeros(s);
    gpu->pool_forward(p, gx, gy);
    gpu->pool_backward(p, gx, gy, device(dy), gdx);
    expect_close(gy, y, "pool forward");
    expect_close(gdx, dx, "pool backward");
  }
  {
    Tensor y = host_zeros({4, 8, 1, 1}), gy = device_zeros({4, 8, 1, 1});
    cpu.adaptive_avg_pool_forward(x, y);
    gpu->adaptive_avg_pool_forward(device(x), gy);
    expect_close(gy, y, "adaptive pool forward");
    const Tensor g = host({4, 8, 1, 1});
    Tensor dx = host_zeros(s), gdx = device_zeros(s);
    cpu.adaptive_avg_pool_backward(g, dx);
    gpu->adaptive_avg_pool_backward(device(g), gdx);
    expect_close(gdx, dx, "adaptive pool backward");
  }
  {
    Tensor y = host_zeros(s), gy = device_zeros(s), dx = host_zeros(s), gdx = device_zeros(s);
    cpu.relu_forward(x, y);
    gpu->relu_forward(device(x), gy);
    expect_close(gy, y, "relu");
    cpu.relu_backward(y, other, dx);
    gpu->relu_backward(gy, device(other), gdx);
    expect_close(gdx, dx, "relu backward");
    Tensor sum = host_zeros(s), gsum = device_zeros(s);
    cpu.add(x, other, sum);
    gpu->add(device(x), device(other), gsum);
    expect_close(gsum, sum, "add");
    Tensor acc = host_zeros(s), gacc = device_zeros(s);
    cpu.copy(other, acc);
    gpu->copy(device(other), gacc);
    cpu.accumulate(x, acc);
    gpu->accumulate(device(x), gacc);
    expect_close(gacc, acc, "accumulate");
    Tensor mask = host_zeros(s), gmask = device_zeros(s), yd = host_zeros(s), gyd = device_zeros(s);
    cpu.dropout_forward(x, 0.3f, 5, mask, yd);
    gpu->dropout_forward(device(x), 0.3f, 5, gmask, gyd);
    expect_close(gmask, mask, "dropout mask");
    expect_close(gyd, yd, "dropout");
  }
  {
    const Tensor b = host({8});
    Tensor yb = host(s), gyb = device(yb);
    cpu.bias_add(b, yb);
    gpu->bias_add(device(b), gyb);
    expect_close(gyb, yb, "bias add");
    Tensor db = host_zeros({8}), gdb = device_zeros({8});
    cpu.bias_backward(x, db);
    gpu->bias_backward(device(x), gdb);
    expect_close(gdb, db, "bias gradient");
  }
  // The loss: 16-bit logits, f32 probabilities and loss, 16-bit (scaled) gradient.
  const Tensor logits = host({16, 10}, -3.f, 3.f);
  Tensor labels = cpu.empty({16}, DType::kI64, MemCategory::kData, "labels");
  for (int64_t i = 0; i < 16; ++i) labels.data<int64_t>()[i] = i % 10;
  Tensor probs = host_zeros({16, 10}, DType::kF32), loss = host_zeros({1}, DType::kF32);
  Tensor dl = host_zeros({16, 10});
  Tensor scaler = host_zeros({kLossScaleSlots}, DType::kF32);
  scaler.data<float>()[kScaleSlot] = 1024.f;
  cpu.softmax_cross_entropy(logits, labels, probs, loss);
  cpu.softmax_cross_entropy_backward_scaled(probs, labels, scaler, dl);
  Tensor glabels = device(labels), gprobs = device_zeros({16, 10}, DType::kF32);
  Tensor gloss = device_zeros({1}, DType::kF32), gdl = device_zeros({16, 10});
  Tensor gscaler = device(scaler);
  gpu->softmax_cross_entropy(device(logits), glabels, gprobs, gloss);
  gpu->softmax_cross_entropy_backward_scaled(gprobs, glabels, gscaler, gdl);
  expect_close(gloss, loss, "loss", 1e-6);
  expect_close(gprobs, probs, "probabilities", 1e-6);
  expect_close(gdl, dl, "scaled loss gradient");

  // SGD on f32 master weights from a 16-bit gradient, unscaled by 1/1024, writing the 16-bit
  // copy in the same kernel; then a step with an inf in the gradient is skipped.
  const Shape ps{1001};
  Tensor grad = host(ps, -1.f, 1.f);
  const Tensor buf0 = host(ps, DType::kF32), param0 = host(ps, DType::kF32);
  Tensor buf = host_zeros(ps, DType::kF32), param = host_zeros(ps, DType::kF32);
  cpu.copy(buf0, buf);
  cpu.copy(param0, param);
  Tensor copy = host_zeros(ps);
  Tensor gbuf = device(buf0), gparam = device(param0), gcopy = device_zeros(ps);
  const SgdConfig cfg{0.05f, 0.9f, 1e-3f};
  cpu.find_non_finite(grad, scaler);
  cpu.sgd_update_with_copy(cfg, grad, &scaler, buf, param, copy);
  cpu.update_loss_scale(LossScaleConfig{}, scaler);
  Tensor ggrad = device(grad);
  gpu->find_non_finite(ggrad, gscaler);
  gpu->sgd_update_with_copy(cfg, ggrad, &gscaler, gbuf, gparam, gcopy);
  gpu->update_loss_scale(LossScaleConfig{}, gscaler);
  expect_close(gbuf, buf, "momentum", 1e-6);
  expect_close(gparam, param, "master weights", 1e-6);
  expect_close(gcopy, copy, "16-bit copy");
  expect_close(gscaler, scaler, "loss-scale state", 0);
  Tensor inf = host_zeros({1});
  cpu.fill(inf, INFINITY);
  cudaMemcpy(static_cast<char*>(ggrad.raw()) + 500 * dtype_size(data()), inf.raw(),
             dtype_size(data()), cudaMemcpyHostToDevice);
  // The skipped step leaves the GPU's own master weights as they were, bit for bit (the CPU's
  // differ from them by the first step's rounding: nvcc's fused multiply-adds).
  Tensor before = host_zeros(ps, DType::kF32);
  gpu->copy_to_host(gparam, before.raw());
  gpu->find_non_finite(ggrad, gscaler);
  gpu->sgd_update_with_copy(cfg, ggrad, &gscaler, gbuf, gparam, gcopy);
  gpu->update_loss_scale(LossScaleConfig{}, gscaler);
  expect_close(gparam, before, "master weights after a skipped step", 0);
  float state[kLossScaleSlots];
  gpu->copy_to_host(gscaler, state);
  EXPECT_EQ(state[kScaleSlot], 512.f);
  EXPECT_EQ(state[kSkippedSlot], 1.f);
  EXPECT_EQ(state[kFoundInfSlot], 0.f);
}

// The CUDA backend stores 16-bit activations channels-last (NHWC) in training. Each op that cares
// about the layout, run on NHWC tensors, against the CPU backend's NCHW result reordered.
std::vector<uint8_t> to_nhwc(const Tensor& t) { return reordered_bytes(t); }

TEST_P(CudaSixteenBit, ChannelsLastOpsMatchTheCpuReordered) {
  // The host reference, NCHW, reordered: what a channels-last device tensor must hold.
  const auto nhwc_of = [&](const Tensor& host_nchw) {
    Tensor h = host_zeros(host_nchw.shape(), host_nchw.dtype());
    std::memcpy(h.raw(), to_nhwc(host_nchw).data(), h.bytes());
    return h;
  };
  const auto device_nhwc = [&](const Tensor& host_nchw) {
    Tensor d = gpu->empty(host_nchw.shape(), host_nchw.dtype(), MemCategory::kActivations, "d",
                          Layout::kNHWC);
    gpu->copy_from_host(to_nhwc(host_nchw).data(), d);
    return d;
  };
  const auto device_zeros_nhwc = [&](const Shape& s) { return device_nhwc(host_zeros(s)); };
  ConvDesc d = small_conv();
  const Shape xs{4, 16, 14, 14}, ws{32, 16, 3, 3}, ys{4, 32, 14, 14};
  const Tensor x = host(xs), w = host(ws, -0.2f, 0.2f), b = host({32}), dy = host(ys);
  auto cplan = cpu.make_conv_plan(d);
  Tensor y = host_zeros(ys), dx = host_zeros(xs), dw = host_zeros(ws);
  cpu.conv_bias_forward(*cplan, x, w, b, y);
  cpu.conv_backward_data(*cplan, dy, w, dx);
  cpu.conv_backward_filter(*cplan, x, dy, dw);
  d.layout = Layout::kNHWC;
  ASSERT_EQ(gpu->activation_layout(types()), Layout::kNHWC);
  auto gplan = gpu->make_conv_plan(d);
  Tensor gx = device_nhwc(x), gw = device_nhwc(w), gdy = device_nhwc(dy);
  Tensor gy = device_zeros_nhwc(ys), gdx = device_zeros_nhwc(xs), gdw = device_zeros_nhwc(ws);
  gpu->conv_bias_forward(*gplan, gx, gw, device(b), gy);
  gpu->conv_backward_data(*gplan, gdy, gw, gdx);
  gpu->conv_backward_filter(*gplan, gx, gdy, gdw);
  expect_close(gy, nhwc_of(y), "forward with bias, NHWC");
  expect_close(gdx, nhwc_of(dx), "backward-data, NHWC");
  expect_close(gdw, nhwc_of(dw), "backward-filter, NHWC (KRSC)");

  // Batch norm + ReLU in NHWC, fused or not.
  const Shape bs{8, 64, 7, 7}, c{64};
  const Tensor bx = host(bs, -2.f, 3.f), bdy = host(bs);
  const Tensor gamma = host(c, DType::kF32), beta = host(c, DType::kF32);
  Tensor rm = host_zeros(c, DType::kF32), rv = host_zeros(c, DType::kF32);
  cpu.fill(rv, 1.f);
  Tensor mean = host_zeros(c, DType::kF32), inv = host_zeros(c, DType::kF32), by = host_zeros(bs);
  cpu.batch_norm_relu_train(bx, gamma, beta, rm, rv, mean, inv, by, 0.1f, 1e-5f);
  Tensor grm = device_zeros(c, DType::kF32), grv = device_zeros(c, DType::kF32);
  gpu->fill(grv, 1.f);
  Tensor gmean = device_zeros(c, DType::kF32), ginv = device_zeros(c, DType::kF32);
  Tensor gbx = device_nhwc(bx), gby = device_zeros_nhwc(bs);
  gpu->batch_norm_relu_train(gbx, device(gamma), device(beta), grm, grv, gmean, ginv, gby, 0.1f,
                             1e-5f);
  expect_close(gby, nhwc_of(by), "batch norm + relu, NHWC");
  expect_close(gmean, mean, "saved mean, NHWC", 1e-5);
  // Backward, masked by the GPU's own output (read back and reordered to NCHW for the CPU).
  std::vector<uint8_t> raw(gby.bytes());
  gpu->copy_to_host(gby, raw.data());
  Tensor gpu_nhwc = host_zeros(bs), by_gpu = host_zeros(bs);
  std::memcpy(gpu_nhwc.raw(), raw.data(), raw.size());
  std::memcpy(by_gpu.raw(), reordered_bytes(gpu_nhwc, false).data(), raw.size());
  Tensor bdx = host_zeros(bs), dg = host_zeros(c), db = host_zeros(c);
  cpu.batch_norm_relu_backward(bx, by_gpu, bdy, gamma, mean, inv, bdx, dg, db);
  Tensor gbdx = device_zeros_nhwc(bs), gdg = device_zeros(c), gdb = device_zeros(c);
  gpu->batch_norm_relu_backward(gbx, gby, device_nhwc(bdy), device(gamma), gmean, ginv, gbdx, gdg,
                                gdb);
  expect_close(gbdx, nhwc_of(bdx), "batch norm + relu backward, NHWC");
  expect_close(gdg, dg, "dgamma, NHWC");
  expect_close(gdb, db, "dbeta, NHWC");

  // Max pooling from NHWC into NCHW (as before a flatten), both passes.
  PoolDesc p;
  p.kernel_h = p.kernel_w = 3;
  p.stride_h = p.stride_w = 2;
  p.pad_h = p.pad_w = 1;
  const Shape ps{4, 8, 15, 15}, po{4, 8, 8, 8};
  const Tensor px = host(ps), pdy = host(po);
  Tensor py = host_zeros(po), pdx = host_zeros(ps);
  cpu.pool_forward(p, px, py);
  cpu.pool_backward(p, px, py, pdy, pdx);
  Tensor gpx = device_nhwc(px), gpy = device_zeros(po), gpdx = device_zeros_nhwc(ps);
  gpu->pool_forward(p, gpx, gpy);
  gpu->pool_backward(p, gpx, gpy, device(pdy), gpdx);
  expect_close(gpy, py, "max pool NHWC -> NCHW");
  expect_close(gpdx, nhwc_of(pdx), "max pool backward NCHW -> NHWC");

  // A conv weight's 16-bit copy and gradient are KRSC; SGD updates its KCRS master.
  const Tensor master = host(ws, DType::kF32);
  Tensor gmaster = device(master), gmomentum = device_zeros(ws, DType::kF32);
  Tensor gcopy = device_zeros_nhwc(ws);
  gpu->cast(gmaster, gcopy);
  Tensor copy = host_zeros(ws);
  cpu.cast(master, copy);
  expect_close(gcopy, nhwc_of(copy), "cast into KRSC", 0);
  const Tensor grad = host(ws);
  Tensor momentum = host_zeros(ws, DType::kF32), updated = host_zeros(ws, DType::kF32);
  cpu.copy(master, updated);
  const SgdConfig cfg{0.05f, 0.9f, 1e-3f};
  cpu.sgd_update_with_copy(cfg, grad, nullptr, momentum, updated, copy);
  gpu->sgd_update_with_copy(cfg, device_nhwc(grad), nullptr, gmomentum, gmaster, gcopy);
  expect_close(gmaster, updated, "master after SGD from a KRSC gradient", 1e-6);
  expect_close(gcopy, nhwc_of(copy), "KRSC copy after SGD");
}

INSTANTIATE_TEST_SUITE_P(Precisions, CudaSixteenBit,
                         ::testing::Values(Precision::kFp16, Precision::kBf16),
                         [](const auto& info) { return std::string(precision_name(info.param)); });

// One resnet18 SGD step in bf16 on the GPU against the CPU backend's bf16, from the same weights
// and batch. The reference for "close" is what bf16 itself costs: the distance between the CPU's
// bf16 and fp32 steps. Two bf16 implementations that differ only in summation order and rounding
// points must be at least as close to each other as bf16 is to fp32 (the bound the bf16 parity
// test with PyTorch uses, tests/parity/torch_parity.py): the GPU's update may differ from the
// CPU's bf16 update by at most that distance, and its loss by at most twice the loss's.
TEST(CudaTraining, Resnet18Bf16StepMatchesTheCpuBackendsBf16) {
  CpuBackend cpu({});
  auto gpu = make_backend(BackendKind::kCuda, {});
  const auto step = [](Backend& backend, Precision precision, std::vector<float>* update) {
    Graph g = build_model("resnet18", ModelConfig{4, 48, 1000, 0.f});
    Rng r(3);
    g.declare_for(backend, PrecisionPolicy::for_precision(precision));
    Rng data(9);
    std::vector<float> images(4 * 3 * 48 * 48);
    for (float& v : images) v = data.uniform(-1.f, 1.f);
    const std::vector<int64_t> labels{1, 7, 42, 999};
    TrainConfig tc;
    tc.sgd = SgdConfig{0.01f, 0.9f, 1e-4f};
    Trainer t(backend, g, tc, r);
    std::vector<std::vector<float>> before;
    // In logical order: the CPU stores its convolution weights in oneDNN's blocks, the GPU KCRS.
    const auto logical = [&](const Tensor& t) {
      const HostTensor h = to_host(backend, t);
      std::vector<float> v(static_cast<size_t>(t.numel()));
      std::memcpy(v.data(), h.bytes.data(), h.bytes.size());
      return v;
    };
    for (const auto& np : g.named_params()) before.push_back(logical(np.param.value));
    t.load_batch(images.data(), labels.data());
    t.step();
    size_t i = 0;
    for (const auto& np : g.named_params()) {
      const std::vector<float> w = logical(np.param.value);  // the f32 master weights
      for (size_t j = 0; j < w.size(); ++j) update->push_back(w[j] - before[i][j]);
      ++i;
    }
    return t.take_losses().at(0);
  };
  std::vector<float> u32, u16, ug;
  const float l32 = step(cpu, Precision::kFp32, &u32);
  const float l16 = step(cpu, Precision::kBf16, &u16);
  const float lg = step(*gpu, Precision::kBf16, &ug);
  ASSERT_EQ(ug.size(), u16.size());
  double bf16_cost = 0, gpu_cpu = 0;
  for (size_t j = 0; j < u16.size(); ++j) {
    bf16_cost += (static_cast<double>(u16[j]) - u32[j]) * (u16[j] - u32[j]);
    gpu_cpu += (static_cast<double>(ug[j]) - u16[j]) * (ug[j] - u16[j]);
  }
  std::printf(
      "loss fp32 %.6f, cpu bf16 %.6f, gpu bf16 %.6f; update distance: bf16-fp32 %.3e, "
      "gpu-cpu %.3e\n",
      l32, l16, lg, std::sqrt(bf16_cost), std::sqrt(gpu_cpu));
  EXPECT_LE(std::sqrt(gpu_cpu), std::sqrt(bf16_cost));
  EXPECT_LE(std::fabs(lg - l16), 2 * std::fabs(l16 - l32) + 1e-6);
}

// --cuda-graph on the device: six steps with the step captured after the first and replayed,
// against six steps op by op, on the same weights and batch. The replays run the same kernels
// and cuDNN engines on the same memory, so they may differ from op-by-op steps only where an
// engine's sums are nondeterministic (atomics in some backward-filter engines): by as much as
// two op-by-op runs differ from each other, which this test measures, and by at most a few units
// of the data type where those two happened to agree. A frozen per-step value (dropout's draws:
// digits-cnn; the loss scale, which grows every 2 clean steps here: resnet18 fp16) would move
// the losses by far more; num_batches_tracked (resnet18) and the scale must be equal exactly.
TEST(CudaGraph, ReplayedStepsTrainAsStepsOpByOp) {
  struct Case {
    const char* model;
    int64_t batch, image;
    Precision precision;
    double unit;  // one unit in the last place of the data type, relative
  };
  for (const Case& c : {Case{"digits-cnn", 8, 8, Precision::kFp32, 0x1p-23},
                        Case{"resnet18", 8, 32, Precision::kBf16, 0x1p-8},
                        Case{"resnet18", 8, 32, Precision::kFp16, 0x1p-11}}) {
    SCOPED_TRACE(fmt::format("{} {}", c.model, precision_name(c.precision)));
    struct Run {
      std::vector<float> losses;
      std::vector<uint8_t> batches_tracked;
      StepGraphStats graphs;
      float scale = 0;
    };
    const auto train = [&](bool capture) {
      auto gpu = make_backend(BackendKind::kCuda, {});
      Graph g = build_model(c.model, ModelConfig{c.batch, c.image, 10, {}});
      Rng r(3);
      g.declare_for(*gpu, PrecisionPolicy::for_precision(c.precision));
      const int64_t channels = g.shape(0)[1];
      Rng data(9);
      std::vector<float> images(c.batch * channels * c.image * c.image);
      for (float& v : images) v = data.uniform(-1.f, 1.f);
      std::vector<int64_t> labels(c.batch);
      for (int64_t i = 0; i < c.batch; ++i) labels[i] = i % 10;
      TrainConfig tc;
      tc.sgd = SgdConfig{0.01f, 0.9f, 1e-4f};
      tc.step.capture = capture;
      tc.loss_scaling = LossScaleConfig{1024.f, 2.f, 0.5f, 2};  // fp16 only
      Trainer t(*gpu, g, tc, r);
      t.load_batch(images.data(), labels.data());
      for (int i = 0; i < 6; ++i) t.step();
      Run run{t.take_losses(), {}, t.step_graphs()};
      if (LossScaler* s = t.loss_scaler()) run.scale = s->scale();
      for (const auto& [name, v] : g.state_dict()) {
        if (name.find("num_batches_tracked") != std::string::npos) {
          run.batches_tracked.insert(run.batches_tracked.end(), v.bytes.begin(), v.bytes.end());
        }
      }
      return run;
    };
    const Run a = train(false), b = train(false), graph = train(true);
    EXPECT_EQ(graph.graphs.graphs, 1);
    EXPECT_EQ(graph.graphs.replayed_steps, 5);
    EXPECT_GT(graph.graphs.operations, 10);
    EXPECT_EQ(graph.batches_tracked, a.batches_tracked);
    EXPECT_EQ(graph.scale, a.scale);
    if (c.precision == Precision::kFp16) {
      EXPECT_GT(a.scale, 1024.f);  // it grew during the replays
    }
    ASSERT_EQ(graph.losses.size(), a.losses.size());
    for (size_t i = 0; i < a.losses.size(); ++i) {
      const double spread = std::fabs(static_cast<double>(b.losses[i]) - a.losses[i]);
      const double bound = std::max(4 * spread, 4 * c.unit * std::fabs(a.losses[i]));
      std::printf("%s %s step %zu: op by op %.7f (again %.7f), replayed %.7f\n", c.model,
                  std::string(precision_name(c.precision)).c_str(), i, a.losses[i], b.losses[i],
                  graph.losses[i]);
      EXPECT_LE(std::fabs(static_cast<double>(graph.losses[i]) - a.losses[i]), bound)
          << "step " << i;
    }
  }
}

}  // namespace
}  // namespace dlb

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (dlb::skip_without_gpu()) return dlb::kSkippedExitCode;
  return RUN_ALL_TESTS();
}
