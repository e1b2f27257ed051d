// Every op of the CUDA backend on a real GPU against the CPU backend (the reference), in fp32
// and tf32, and one resnet18 training step. Without a visible GPU the program exits 77 (skipped).
//
// Tolerances, relative to the reference tensor's largest magnitude:
//   - fp32 (strict, no TF32) matrix products: cuBLASLt sums the same products in another order
//     (and with FMAs). For dot products of K terms the difference is ~sqrt(K) * 2^-24 of the
//     scale in practice (a few K * 2^-24 at worst); K = 300 here: 1e-5.
//   - fp32 convolutions: cuDNN may also pick Winograd or FFT engines (numerical notes WINOGRAD,
//     FFT), whose transforms add error of order 1e-5 to 1e-4 of the scale in fp32 (Lavin and
//     Gray, "Fast Algorithms for Convolutional Neural Networks", measure ~1e-4 for F(4x4, 3x3)):
//     1e-4. The chosen engines are printed, so a failure names the one that caused it.
//   - tf32: each input keeps 10 explicit mantissa bits; whether the engine rounds or truncates
//     them, a product is within 2^-10 (9.8e-4) of its fp32 value, and a sum of K such products
//     with random signs within a few of those of its scale: 5e-3, the bound PyTorch's own TF32
//     tests use for convolutions and matrix products.
//   - our own kernels (pooling, bias, batch-norm running statistics, loss, SGD) are compared
//     exactly or within one rounding per operation, as tests/gpu/cuda_kernels_test.cpp argues.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/device_queue.h"
#include "runtime/core/rng.h"
#include "runtime/trace/tracer.h"
#include "runtime/train/trainer.h"
#include "tests/gpu/skip_without_gpu.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

double matmul_tolerance(Precision p) { return p == Precision::kTf32 ? 5e-3 : 1e-5; }
double conv_tolerance(Precision p) { return p == Precision::kTf32 ? 5e-3 : 1e-4; }

class CudaOps : public ::testing::TestWithParam<Precision> {
 protected:
  Tensor host(const Shape& s, float lo = -1.f, float hi = 1.f) {
    Tensor t = cpu.empty(s, DType::kF32, MemCategory::kActivations, "host");
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = rng.uniform(lo, hi);
    return t;
  }
  Tensor host_zeros(const Shape& s) {
    Tensor t = cpu.empty(s, DType::kF32, MemCategory::kActivations, "host");
    cpu.fill(t, 0.f);
    return t;
  }
  Tensor device(const Tensor& h) {
    Tensor d = gpu->empty(h.shape(), h.dtype(), MemCategory::kActivations, "device");
    gpu->copy_from_host(h.raw(), d);
    return d;
  }
  Tensor device_zeros(const Shape& s) { return device(host_zeros(s)); }
  std::vector<float> back(const Tensor& d) {
    std::vector<float> v(d.numel());
    gpu->copy_to_host(d, v.data());
    return v;
  }
  // max |got - want| / max |want| <= rel.
  void expect_close(const Tensor& got_device, const Tensor& want_host, double rel,
                    const char* what) {
    const std::vector<float> got = back(got_device);
    double worst = 0, scale = 0;
    for (int64_t i = 0; i < want_host.numel(); ++i) {
      scale = std::max(scale, std::fabs(static_cast<double>(want_host.data<float>()[i])));
      worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want_host.data<float>()[i]));
    }
    EXPECT_LE(worst, rel * scale) << what << ": worst difference " << worst << " at scale "
                                  << scale;
  }
  OpTypes types() const { return OpTypes{GetParam(), DType::kF32, DType::kF32}; }

  CpuBackend cpu{{}};
  std::unique_ptr<Backend> gpu = make_backend(BackendKind::kCuda, {});
  Rng rng{5};
};

struct ConvCase {
  int64_t c, h, k, r, stride, pad;
  bool bias = false;  // the forward graph adds it in its epilogue (AlexNet's and VGG's convs)
};

TEST_P(CudaOps, ConvolutionAllThreePasses) {
  for (const ConvCase cc :
       {ConvCase{3, 32, 64, 7, 2, 3}, ConvCase{64, 14, 64, 3, 1, 1}, ConvCase{64, 14, 128, 1, 2, 0},
        ConvCase{512, 7, 512, 3, 1, 1}, ConvCase{3, 63, 64, 11, 4, 2, true},
        ConvCase{64, 16, 64, 3, 1, 1, true}}) {
    ConvDesc d;
    d.batch = 4;
    d.in_channels = cc.c;
    d.height = d.width = cc.h;
    d.out_channels = cc.k;
    d.kernel_h = d.kernel_w = cc.r;
    d.stride_h = d.stride_w = cc.stride;
    d.pad_h = d.pad_w = cc.pad;
    d.bias = cc.bias;
    d.types = types();
    const Shape xs{4, cc.c, cc.h, cc.h}, ws{cc.k, cc.c, cc.r, cc.r},
        ys{4, cc.k, d.out_h(), d.out_w()};
    const Tensor x = host(xs), w = host(ws), dy = host(ys);
    ConvDesc reference = d;  // the CPU backend computes strict fp32 only
    reference.types.math = Precision::kFp32;
    auto cpu_plan = cpu.make_conv_plan(reference);
    auto gpu_plan = gpu->make_conv_plan(d);
    ASSERT_EQ(gpu_plan->algorithms().size(), 3u);
    for (const PassAlgorithm& a : gpu_plan->algorithms()) {
      std::printf("conv %ldx%ld %ld->%ld on %ld, %s %s: %s, workspace %zu\n", cc.r, cc.r, cc.c,
                  cc.k, cc.h, precision_name(GetParam()).data(), conv_pass_name(a.pass).data(),
                  a.algorithm.c_str(), a.workspace_bytes);
    }
    const Tensor b = host({cc.k});
    Tensor y = host_zeros(ys), dx = host_zeros(xs), dw = host_zeros(ws);
    if (cc.bias) {
      cpu.conv_bias_forward(*cpu_plan, x, w, b, y);
    } else {
      cpu.conv_forward(*cpu_plan, x, w, y);
    }
    cpu.conv_backward_data(*cpu_plan, dy, w, dx);
    cpu.conv_backward_filter(*cpu_plan, x, dy, dw);
    Tensor gx = device(x), gw = device(w), gdy = device(dy);
    Tensor gy = device_zeros(ys), gdx = device_zeros(xs), gdw = device_zeros(ws);
    if (cc.bias) {
      gpu->conv_bias_forward(*gpu_plan, gx, gw, device(b), gy);
    } else {
      gpu->conv_forward(*gpu_plan, gx, gw, gy);
    }
    gpu->conv_backward_data(*gpu_plan, gdy, gw, gdx);
    gpu->conv_backward_filter(*gpu_plan, gx, gdy, gdw);
    SCOPED_TRACE(::testing::Message() << "conv " << cc.r << "x" << cc.r << " " << cc.c << "->"
                                      << cc.k << " on " << cc.h);
    expect_close(gy, y, conv_tolerance(GetParam()), "forward");
    expect_close(gdx, dx, conv_tolerance(GetParam()), "backward-data");
    expect_close(gdw, dw, conv_tolerance(GetParam()), "backward-filter");
  }
}

TEST_P(CudaOps, MatmulEveryTransposeTheLinearLayerUses) {
  const Tensor x = host({8, 300}), w = host({100, 300}), dy = host({8, 100});
  Tensor y = host_zeros({8, 100}), dx = host_zeros({8, 300}), dw = host_zeros({100, 300});
  cpu.matmul(Precision::kFp32, false, true, 1.f, x, w, 0.f, y);
  cpu.matmul(Precision::kFp32, false, false, 1.f, dy, w, 0.f, dx);
  cpu.matmul(Precision::kFp32, true, false, 1.f, dy, x, 0.f, dw);
  Tensor gx = device(x), gw = device(w), gdy = device(dy);
  Tensor gy = device_zeros({8, 100}), gdx = device_zeros({8, 300}), gdw = device_zeros({100, 300});
  gpu->matmul(GetParam(), false, true, 1.f, gx, gw, 0.f, gy);
  gpu->matmul(GetParam(), false, false, 1.f, gdy, gw, 0.f, gdx);
  gpu->matmul(GetParam(), true, false, 1.f, gdy, gx, 0.f, gdw);
  expect_close(gy, y, matmul_tolerance(GetParam()), "x w^T");
  expect_close(gdx, dx, matmul_tolerance(GetParam()), "dy w");
  expect_close(gdw, dw, matmul_tolerance(GetParam()), "dy^T x");
}

TEST_P(CudaOps, BatchNormTrainingBackwardAndInference) {
  const Shape s{8, 64, 7, 7}, c{64};
  const Tensor x = host(s, -2.f, 3.f), gamma = host(c), beta = host(c), dy = host(s);
  const Tensor rm0 = host(c), rv0 = host(c, 0.5f, 2.f);
  Tensor rm = host_zeros(c), rv = host_zeros(c), mean = host_zeros(c), inv = host_zeros(c);
  cpu.copy(rm0, rm);
  cpu.copy(rv0, rv);
  Tensor y = host_zeros(s), dx = host_zeros(s), dg = host_zeros(c), db = host_zeros(c);
  cpu.batch_norm_train(x, gamma, beta, rm, rv, mean, inv, y, 0.1f, 1e-5f);
  cpu.batch_norm_backward(x, dy, gamma, mean, inv, dx, dg, db);
  Tensor gx = device(x), gg = device(gamma), gb = device(beta), gdy = device(dy);
  Tensor grm = device(rm0), grv = device(rv0), gmean = device_zeros(c), ginv = device_zeros(c);
  Tensor gy = device_zeros(s), gdx = device_zeros(s), gdg = device_zeros(c), gdb = device_zeros(c);
  gpu->batch_norm_train(gx, gg, gb, grm, grv, gmean, ginv, gy, 0.1f, 1e-5f);
  gpu->batch_norm_backward(gx, gdy, gg, gmean, ginv, gdx, gdg, gdb);
  // Reductions over 392 values per channel in another order: 1e-5 (batch norm has no TF32).
  expect_close(gy, y, 1e-5, "y");
  expect_close(gmean, mean, 1e-5, "saved mean");
  expect_close(ginv, inv, 1e-5, "saved 1/sqrt(var + eps)");
  expect_close(grm, rm, 1e-5, "running mean");
  expect_close(grv, rv, 1e-5, "running var (unbiased)");
  expect_close(gdx, dx, 1e-5, "dx");
  expect_close(gdg, dg, 1e-5, "dgamma");
  expect_close(gdb, db, 1e-5, "dbeta");
  Tensor yi = host_zeros(s), gyi = device_zeros(s);
  cpu.batch_norm_infer(x, gamma, beta, rm, rv, yi, 1e-5f);
  gpu->batch_norm_infer(gx, gg, gb, device(rm), device(rv), gyi, 1e-5f);
  expect_close(gyi, yi, 1e-6, "inference");
}

// Batch norm + ReLU as the graph fuses them (one cuDNN graph each way, or the unfused fallback),
// against the CPU's two ops. The backward reference masks dy by the GPU's own output, so an
// output within rounding of zero cannot take the other side of the mask on the two backends.
TEST_P(CudaOps, BatchNormReluFusedBothWays) {
  const Shape s{8, 64, 7, 7}, c{64};
  const Tensor x = host(s, -2.f, 3.f), gamma = host(c), beta = host(c), dy = host(s);
  Tensor rm = host_zeros(c), rv = host_zeros(c), mean = host_zeros(c), inv = host_zeros(c);
  cpu.fill(rv, 1.f);
  Tensor y = host_zeros(s);
  cpu.batch_norm_relu_train(x, gamma, beta, rm, rv, mean, inv, y, 0.1f, 1e-5f);
  Tensor gx = device(x), gg = device(gamma), gdy = device(dy), grm = device_zeros(c),
         grv = device_zeros(c), gmean = device_zeros(c), ginv = device_zeros(c),
         gy = device_zeros(s);
  gpu->fill(grv, 1.f);  // the running statistics start as the CPU's did: mean 0, var 1
  ASSERT_TRUE(gpu->fuses_batch_norm_relu(types()));
  gpu->batch_norm_relu_train(gx, gg, device(beta), grm, grv, gmean, ginv, gy, 0.1f, 1e-5f);
  expect_close(gy, y, 1e-5, "max(batch norm, 0)");
  expect_close(gmean, mean, 1e-5, "saved mean");
  expect_close(ginv, inv, 1e-5, "saved 1/sqrt(var + eps)");
  expect_close(grm, rm, 1e-5, "running mean");
  expect_close(grv, rv, 1e-5, "running var");
  Tensor y_gpu = host_zeros(s);
  gpu->copy_to_host(gy, y_gpu.raw());
  Tensor dx = host_zeros(s), dg = host_zeros(c), db = host_zeros(c);
  cpu.batch_norm_relu_backward(x, y_gpu, dy, gamma, mean, inv, dx, dg, db);
  Tensor gdx = device_zeros(s), gdg = device_zeros(c), gdb = device_zeros(c);
  gpu->batch_norm_relu_backward(gx, gy, gdy, gg, gmean, ginv, gdx, gdg, gdb);
  expect_close(gdx, dx, 1e-5, "dx");
  expect_close(gdg, dg, 1e-5, "dgamma");
  expect_close(gdb, db, 1e-5, "dbeta");
}

TEST_P(CudaOps, PoolingBiasLossAndUpdate) {
  const Shape s{4, 8, 15, 15};
  PoolDesc p;
  p.kernel_h = p.kernel_w = 3;
  p.stride_h = p.stride_w = 2;
  p.pad_h = p.pad_w = 1;
  const Shape o{4, 8, 8, 8};
  const Tensor x = host(s), dy = host(o);
  for (PoolMode m : {PoolMode::kMax, PoolMode::kAvg}) {
    p.mode = m;
    Tensor y = host_zeros(o), dx = host_zeros(s);
    cpu.pool_forward(p, x, y);
    cpu.pool_backward(p, x, y, dy, dx);
    Tensor gx = device(x), gy = device_zeros(o), gdx = device_zeros(s);
    gpu->pool_forward(p, gx, gy);
    gpu->pool_backward(p, gx, gy, device(dy), gdx);
    expect_close(gy, y, 1e-7, "pool forward");
    expect_close(gdx, dx, 1e-6, "pool backward");
  }
  const Tensor b = host({8});
  Tensor yb = host(s);
  Tensor gyb = device(yb);
  cpu.bias_add(b, yb);
  gpu->bias_add(device(b), gyb);
  expect_close(gyb, yb, 1e-7, "bias add");
  Tensor db = host_zeros({8}), gdb = device_zeros({8});
  cpu.bias_backward(x, db);
  gpu->bias_backward(device(x), gdb);
  expect_close(gdb, db, 1e-6, "bias gradient");

  const Tensor logits = host({16, 10}, -3.f, 3.f);
  Tensor labels = cpu.empty({16}, DType::kI64, MemCategory::kData, "labels");
  for (int64_t i = 0; i < 16; ++i) labels.data<int64_t>()[i] = i % 10;
  Tensor probs = host_zeros({16, 10}), loss = host_zeros({1}), dl = host_zeros({16, 10});
  cpu.softmax_cross_entropy(logits, labels, probs, loss);
  cpu.softmax_cross_entropy_backward(probs, labels, dl);
  Tensor glabels = device(labels), gprobs = device_zeros({16, 10}), gloss = device_zeros({1}),
         gdl = device_zeros({16, 10});
  gpu->softmax_cross_entropy(device(logits), glabels, gprobs, gloss);
  gpu->softmax_cross_entropy_backward(gprobs, glabels, gdl);
  expect_close(gloss, loss, 1e-6, "loss");
  expect_close(gdl, dl, 1e-6, "loss gradient");
}

INSTANTIATE_TEST_SUITE_P(Precisions, CudaOps, ::testing::Values(Precision::kFp32, Precision::kTf32),
                         [](const auto& info) { return std::string(precision_name(info.param)); });

// The backend's clock is the device's: marks around work queued without waiting read the
// work's time on the GPU, and a Tracer on that clock places spans between them.
TEST(CudaClock, MarksReadTheDevicesTimeNotTheHosts) {
  auto gpu = make_backend(BackendKind::kCuda, {});
  Tensor t = gpu->empty({1 << 26}, DType::kF32, MemCategory::kActivations, "t");  // 256 MiB
  const Clock& clock = gpu->clock();
  Tracer tracer(0, 1, &clock);
  tracer.begin_step(0);
  const Mark a = clock.mark();
  const auto host0 = std::chrono::steady_clock::now();
  const std::string name = "fills";
  {
    TraceScope scope(&tracer, name, "forward");
    for (int i = 0; i < 20; ++i) gpu->fill(t, static_cast<float>(i));  // ~5 GB written
  }
  const double host_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - host0).count();
  const Mark b = clock.mark();
  tracer.end_window();
  const double device_us = clock.elapsed_us(a, b);
  // 5 GB at a few TB/s: about 2 ms of device time, while queueing 20 launches takes the host far
  // less; a host clock would have read the latter.
  EXPECT_GT(device_us, 500.0);
  EXPECT_LT(device_us, 1e6);
  EXPECT_LT(host_us, device_us) << "the host waited for the device";
  ASSERT_EQ(tracer.spans().size(), 1u);
  EXPECT_NEAR(tracer.spans()[0].duration_us, device_us, 0.2 * device_us);
}

// One resnet18 step (batch 4, 48x48, SGD with momentum and weight decay) from the same weights
// and batch on both backends, compared as tests/parity/torch_parity.py compares dlbench with
// PyTorch: the loss and every gradient within 1e-4 of the tensor's scale (both agree with float64
// to ~1e-5 there), and every update (weights after minus before) within 1e-2 of its scale, which
// tests the gradients far more sharply than the weights themselves. A ReLU input within float
// rounding of zero could take opposite sides on the two backends and move one batch-norm
// gradient (tests/parity/torch_parity.py searches for a seed free of such inputs; the device
// check runs it on the GPU too): a failure confined to one layer should be read with that in
// mind.
TEST(CudaTraining, Resnet18StepMatchesTheCpuBackend) {
  CpuBackend cpu({});
  auto gpu = make_backend(BackendKind::kCuda, {});
  const ModelConfig mc{4, 48, 1000, 0.f};
  Graph gc = build_model("resnet18", mc), gg = build_model("resnet18", mc);
  Rng r1(3), r2(3);
  gc.declare_for(cpu);
  gg.declare_for(*gpu);
  Rng data(9);
  std::vector<float> images(4 * 3 * 48 * 48);
  for (float& v : images) v = data.uniform(-1.f, 1.f);
  const std::vector<int64_t> labels{1, 7, 42, 999};
  TrainConfig tc;
  tc.sgd = SgdConfig{0.01f, 0.9f, 1e-4f};
  Trainer tcpu(cpu, gc, tc, r1), tgpu(*gpu, gg, tc, r2);
  auto pc = gc.named_params(), pg = gg.named_params();
  ASSERT_EQ(pc.size(), pg.size());
  // In logical order: the CPU stores its convolution weights in oneDNN's blocks, the GPU KCRS.
  const auto logical = [](Backend& b, const Tensor& t) {
    const HostTensor h = to_host(b, t);
    std::vector<float> v(static_cast<size_t>(t.numel()));
    std::memcpy(v.data(), h.bytes.data(), h.bytes.size());
    return v;
  };
  std::vector<std::vector<float>> before;
  for (const auto& np : pc) before.push_back(logical(cpu, np.param.value));
  tcpu.load_batch(images.data(), labels.data());
  tgpu.load_batch(images.data(), labels.data());
  tcpu.step();
  tgpu.step();
  const float lc = tcpu.take_losses().at(0), lg = tgpu.take_losses().at(0);
  EXPECT_NEAR(lg, lc, 1e-4 * std::fabs(lc));
  auto worst_of = [](const float* got, const float* want, const float* base, int64_t n) {
    double worst = 0, scale = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double w = want[j] - (base ? base[j] : 0.f), g = got[j] - (base ? base[j] : 0.f);
      scale = std::max(scale, std::fabs(w));
      worst = std::max(worst, std::fabs(g - w));
    }
    return scale > 0 ? worst / scale : worst;
  };
  for (size_t i = 0; i < pc.size(); ++i) {
    SCOPED_TRACE(pc[i].name);
    const std::vector<float> want_w = logical(cpu, pc[i].param.value);
    const std::vector<float> want_g = logical(cpu, pc[i].param.grad);
    const std::vector<float> got_w = logical(*gpu, pg[i].param.value);
    const std::vector<float> got_g = logical(*gpu, pg[i].param.grad);
    const auto n = static_cast<int64_t>(want_w.size());
    EXPECT_LE(worst_of(got_g.data(), want_g.data(), nullptr, n), 1e-4) << "gradient";
    EXPECT_LE(worst_of(got_w.data(), want_w.data(), before[i].data(), n), 1e-2) << "update";
  }
}

// The input copies' order, without relying on timing luck: a copy ordered after a long run of
// fills on the compute stream has not finished while they run, and compute queued after
// wait_for_input has not finished while a large copy is in flight (256 MiB crosses PCIe in 5 ms
// or more; the host looks after 1 ms, while the compute stream alone would have finished in
// microseconds).
TEST(CudaInputCopies, ACopyWaitsForItsMarkAndComputeWaitsForTheCopy) {
  auto gpu = make_backend(BackendKind::kCuda, {});
  const auto event = [](const Mark& m) { return static_cast<cudaEvent_t>(m.device.get()); };
  Tensor busy = gpu->empty({1 << 26}, DType::kF32, MemCategory::kActivations, "busy");  // 256 MiB
  Tensor small = gpu->empty({1 << 10}, DType::kF32, MemCategory::kData, "small");
  std::vector<float> host_small(1 << 10, 3.f);
  for (int i = 0; i < 100; ++i) gpu->fill(busy, static_cast<float>(i));  // ~25 GB: milliseconds
  const Backend::CopyMarks after_fills =
      gpu->copy_in(host_small.data(), small, gpu->clock().mark());
  EXPECT_EQ(cudaEventQuery(event(after_fills.end)), cudaErrorNotReady)
      << "the copy ran before the compute it was ordered after";
  gpu->synchronize();
  EXPECT_EQ(cudaEventQuery(event(after_fills.end)), cudaSuccess);

  Tensor large = gpu->empty({1 << 26}, DType::kF32, MemCategory::kData, "large");
  std::vector<float> host_large(size_t{1} << 26, 1.f);
  const Backend::CopyMarks copied = gpu->copy_in(host_large.data(), large, gpu->clock().mark());
  gpu->wait_for_input(copied.end);
  const Mark compute = gpu->clock().mark();
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(cudaEventQuery(event(compute)), cudaErrorNotReady)
      << "the compute stream did not wait for the copy";
  gpu->synchronize();
  std::vector<float> back(4);
  gpu->copy_to_host(large.slice_flat((1 << 26) - 4, 4), back.data());
  EXPECT_EQ(back, std::vector<float>(4, 1.f));
}

// A new batch every step, as an epoch loads them: on the GPU each is copied on the copy stream
// into the input buffer the step before did not read, while that step computes. Each step must
// still compute on its own batch: its loss follows the CPU backend's (one buffer, synchronous
// copies) within what one step's rounding differences amount to (1e-3 of the loss, as
// Resnet18StepMatchesTheCpuBackend; a step on a stale or half-copied batch is off by tenths).
// The weights stay put (lr 0): a training run's small differences grow from step to step (on
// an H200 they had grown to 0.4 by the fourth step), which says nothing of the copies.
TEST(CudaTraining, DoubleBufferedBatchesTrainAsOnTheCpu) {
  CpuBackend cpu({});
  auto gpu = make_backend(BackendKind::kCuda, {});
  ASSERT_TRUE(gpu->async_input_copies());
  const ModelConfig mc{4, 32, 10, 0.f};
  Graph gc = build_model("resnet18", mc), gg = build_model("resnet18", mc);
  Rng r1(3), r2(3);
  gc.declare_for(cpu);
  gg.declare_for(*gpu);
  TrainConfig tc;
  tc.sgd = SgdConfig{0.f, 0.f, 0.f};
  Trainer tcpu(cpu, gc, tc, r1), tgpu(*gpu, gg, tc, r2);
  Rng data(11);
  std::vector<float> images(4 * 3 * 32 * 32);
  std::vector<int64_t> labels(4);
  for (int step = 0; step < 5; ++step) {
    for (float& v : images) v = data.uniform(-1.f, 1.f);
    for (int64_t& l : labels) l = static_cast<int64_t>(data.below(10));
    tcpu.load_batch(images.data(), labels.data());
    tgpu.load_batch(images.data(), labels.data());  // the host buffer is refilled at once
    tcpu.step();
    tgpu.step();
  }
  const std::vector<float> lc = tcpu.take_losses(), lg = tgpu.take_losses();
  ASSERT_EQ(lg.size(), lc.size());
  for (size_t i = 0; i < lc.size(); ++i) {
    EXPECT_NEAR(lg[i], lc[i], 1e-3 * std::fabs(lc[i])) << "step " << i;
  }
}

// Swapping's copies (--swap; Backend::swap_copy) in the same way as the input copies above: a
// copy to pinned host memory ordered after a long run of fills has not finished while they run
// (it would copy values the fills have not written yet), and compute queued after wait_for_copy
// has not finished while a large copy back is in flight. Then the bytes arrived, both ways.
TEST(CudaSwapCopies, ACopyWaitsForComputeAndComputeWaitsForTheCopy) {
  auto gpu = make_backend(BackendKind::kCuda, {});
  const auto event = [](const Mark& m) { return static_cast<cudaEvent_t>(m.device.get()); };
  Tensor busy = gpu->empty({1 << 26}, DType::kF32, MemCategory::kActivations, "busy");  // 256 MiB
  const size_t device = gpu->allocator().stats().total_current;
  Tensor host = gpu->empty({1 << 26}, DType::kF32, MemCategory::kHostSwap, "host copy");
  EXPECT_EQ(gpu->allocator().stats().total_current, device) << "the host copy is device memory";
  cudaPointerAttributes where{};
  ASSERT_EQ(cudaPointerGetAttributes(&where, host.raw()), cudaSuccess);
  EXPECT_EQ(where.type, cudaMemoryTypeHost) << "the host copy is not pinned host memory";
  for (int i = 0; i < 100; ++i) gpu->fill(busy, static_cast<float>(i));
  const Backend::CopyMarks out = gpu->swap_copy(busy, host);
  EXPECT_EQ(cudaEventQuery(event(out.end)), cudaErrorNotReady)
      << "the copy out ran before the compute it was ordered after";
  gpu->synchronize();
  EXPECT_EQ(host.data<float>()[(1 << 26) - 1], 99.f) << "the copy out read the last fill's bytes";

  gpu->fill(busy, -1.f);
  const Backend::CopyMarks in = gpu->swap_copy(host, busy);
  gpu->wait_for_copy(in.end);
  const Mark compute = gpu->clock().mark();
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(cudaEventQuery(event(compute)), cudaErrorNotReady)
      << "the compute stream did not wait for the copy in";
  gpu->synchronize();
  std::vector<float> back(4);
  gpu->copy_to_host(busy.slice_flat((1 << 26) - 4, 4), back.data());
  EXPECT_EQ(back, std::vector<float>(4, 99.f));
}

// One step of resnet18 on the GPU with every activation swapped (--swap=all) against the same
// step without swapping: the same gradients within what cuDNN's nondeterministic reductions
// amount to (1e-4 of each gradient's scale, as against the CPU above); an activation read before
// its copy came back, or overwritten before its copy out, is off by the gradient's scale. The
// weights stay put (lr 0), so only that step's arithmetic is compared.
TEST(CudaTraining, SwappedActivationsGiveTheSameGradients) {
  const ModelConfig mc{4, 32, 10, 0.f};
  Rng data(5);
  std::vector<float> images(4 * 3 * 32 * 32);
  for (float& v : images) v = data.uniform(-1.f, 1.f);
  const std::vector<int64_t> labels{1, 2, 3, 4};
  std::vector<float> grads[2];
  for (int swap = 0; swap < 2; ++swap) {
    auto gpu = make_backend(BackendKind::kCuda, {});
    Graph g = build_model("resnet18", mc);
    Rng rng(3);
    g.declare_for(*gpu);
    TrainConfig tc;
    tc.sgd = SgdConfig{0.f, 0.f, 0.f};
    tc.step.memory_plan = MemoryPlanKind::kReuse;
    if (swap) tc.step.swap = SwapPolicy{SwapPolicy::Kind::kAll, {}};
    Trainer t(*gpu, g, tc, rng);
    if (swap) {
      ASSERT_GT(t.swapped().size(), 10u);
    }
    t.load_batch(images.data(), labels.data());
    t.step();
    gpu->synchronize();
    const Tensor& flat = t.bound().tensor(g.flat_gradient_id());
    grads[swap].resize(static_cast<size_t>(flat.numel()));
    gpu->copy_to_host(flat, grads[swap].data());
  }
  double worst = 0, scale = 0;
  for (size_t j = 0; j < grads[0].size(); ++j) {
    scale = std::max(scale, std::fabs(static_cast<double>(grads[0][j])));
    worst = std::max(worst, std::fabs(static_cast<double>(grads[1][j]) - grads[0][j]));
  }
  EXPECT_GT(scale, 0);
  EXPECT_LE(worst, 1e-4 * scale);
}

}  // namespace
}  // namespace dlb

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (dlb::skip_without_gpu()) return dlb::kSkippedExitCode;
  return RUN_ALL_TESTS();
}

namespace dlb {
namespace {

// The NCCL watchdog's thread queries events while the main thread may be capturing the step into
// a CUDA graph in global mode (--cuda-graph). Its queue makes those queries allowed
// (make_current_for_watching): the query answers, and the capture survives (pytorch/pytorch
// 104487 is the failure without it: the query fails and invalidates the capture).
TEST(CudaDeviceQueue, AWatchingThreadMayQueryDuringAGlobalCapture) {
  auto queue = make_device_queue(0);
  std::shared_ptr<DeviceEvent> event = queue->record();
  cudaStream_t captured = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&captured, cudaStreamNonBlocking), cudaSuccess);
  float* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, 1024), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(captured, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(buf, 0, 1024, captured), cudaSuccess);
  bool settled = false;
  std::string error;
  std::thread watcher([&] {
    try {
      queue->make_current_for_watching();
      settled = event->settled();
      (void)event->done();
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  watcher.join();
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(captured, &graph), cudaSuccess)
      << "the watching thread's query invalidated the capture";
  EXPECT_EQ(error, "");
  EXPECT_TRUE(settled);
  if (graph) cudaGraphDestroy(graph);
  cudaFree(buf);
  cudaStreamDestroy(captured);
}

}  // namespace
}  // namespace dlb
