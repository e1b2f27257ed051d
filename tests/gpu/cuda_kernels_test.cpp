// The CUDA backend's own kernels on a real GPU, against the CPU backend. Exact where the device
// does the same operations as the host (ReLU, add, accumulate, dropout, the loss gradient,
// adaptive pooling: IEEE adds, multiplies and divisions); within a rounding per operation where
// nvcc contracts multiply-adds (SGD) or CUDA's double exp/log differ from glibc's by an ulp
// (softmax: one float ulp after rounding). Without a visible GPU the program exits 77 (skipped).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <vector>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cuda/batch_norm_kernels.h"
#include "runtime/backend/cuda/bias_kernels.h"
#include "runtime/backend/cuda/elementwise_kernels.h"
#include "runtime/backend/cuda/launch.h"
#include "runtime/backend/cuda/loss_kernels.h"
#include "runtime/backend/cuda/optimizer_kernels.h"
#include "runtime/backend/cuda/pooling_kernels.h"
#include "runtime/core/rng.h"
#include "tests/gpu/skip_without_gpu.h"

namespace dlb::cuda {
namespace {

class GpuKernels : public ::testing::Test {
 protected:
  // A host tensor with random values, and its copy on the device.
  Tensor host_random(const Shape& s, float lo = -2.f, float hi = 2.f) {
    Tensor t = cpu.empty(s, DType::kF32, MemCategory::kActivations, "h");
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = rng.uniform(lo, hi);
    return t;
  }
  Tensor host_zeros(const Shape& s, DType d = DType::kF32) {
    Tensor t = cpu.empty(s, d, MemCategory::kActivations, "h");
    std::fill(static_cast<char*>(t.raw()), static_cast<char*>(t.raw()) + t.bytes(), 0);
    return t;
  }
  Tensor on_device(const Tensor& h) {
    Tensor d = gpu->empty(h.shape(), h.dtype(), MemCategory::kActivations, "d");
    gpu->copy_from_host(h.raw(), d);
    return d;
  }
  std::vector<float> back(const Tensor& d) {
    std::vector<float> v(d.numel());
    gpu->synchronize();
    gpu->copy_to_host(d, v.data());
    return v;
  }
  static std::vector<float> values(const Tensor& h) {
    return {h.data<float>(), h.data<float>() + h.numel()};
  }
  CpuBackend cpu{{}};
  std::unique_ptr<DeviceMemory> gpu = make_device_memory(BackendKind::kCuda, {});
  Rng rng{11};
};

const Shape kShape{3, 5, 7, 9};

TEST_F(GpuKernels, ElementwiseOpsAreExact) {
  const Tensor x = host_random(kShape), b = host_random(kShape);
  Tensor dx = on_device(x), db = on_device(b), dy = on_device(host_zeros(kShape));
  Tensor y = host_zeros(kShape);
  cpu.relu_forward(x, y);
  launch_for_each(gpu->stream(), x.numel(), ReluForward<float>{dx.data<float>(), dy.data<float>()});
  EXPECT_EQ(back(dy), values(y));
  cpu.add(x, b, y);
  launch_for_each(gpu->stream(), x.numel(),
                  Add<float>{dx.data<float>(), db.data<float>(), dy.data<float>()});
  EXPECT_EQ(back(dy), values(y));
  cpu.accumulate(x, y);
  launch_for_each(gpu->stream(), x.numel(), Accumulate<float>{dx.data<float>(), dy.data<float>()});
  EXPECT_EQ(back(dy), values(y));
}

TEST_F(GpuKernels, DropoutDrawsTheCpuMask) {
  const Shape s{1 << 20};  // more indices than one pass of the grid covers
  const Tensor x = host_random(s);
  Tensor mask = host_zeros(s), y = host_zeros(s);
  cpu.dropout_forward(x, 0.3f, 99, mask, y);
  Tensor dx = on_device(x), dmask = on_device(host_zeros(s)), dy = on_device(host_zeros(s));
  launch_for_each(gpu->stream(), x.numel(),
                  DropoutForward<float>{dx.data<float>(), 0.3f, 99, nullptr, dmask.data<float>(),
                                        dy.data<float>()});
  EXPECT_EQ(back(dmask), values(mask));
  EXPECT_EQ(back(dy), values(y));
}

TEST_F(GpuKernels, SgdWithinOneRoundingPerOperation) {
  const Shape s{100003};
  const Tensor g = host_random(s), buf0 = host_random(s), p0 = host_random(s);
  const SgdConfig cfg{0.1f, 0.9f, 1e-4f};
  Tensor buf = host_zeros(s), p = host_zeros(s);
  cpu.copy(buf0, buf);
  cpu.copy(p0, p);
  cpu.sgd_update(cfg, g, buf, p);
  Tensor dg = on_device(g), dbuf = on_device(buf0), dp = on_device(p0);
  launch_for_each(
      gpu->stream(), s.numel(),
      SgdUpdate<float>{
          cfg, dg.data<float>(), nullptr, dbuf.data<float>(), dp.data<float>(), nullptr, {}});
  const std::vector<float> gb = back(dbuf), gp = back(dp);
  for (int64_t i = 0; i < s.numel(); ++i) {
    // Three multiply-adds, each at most one rounding (2^-24 relative) of its largest term apart.
    const double terms = std::abs(g.data<float>()[i]) +
                         std::abs(cfg.weight_decay * p0.data<float>()[i]) +
                         std::abs(cfg.momentum * buf0.data<float>()[i]);
    ASSERT_NEAR(gb[i], buf.data<float>()[i], 4 * FLT_EPSILON * terms) << i;
    ASSERT_NEAR(gp[i], p.data<float>()[i],
                4 * FLT_EPSILON * (std::abs(p0.data<float>()[i]) + cfg.lr * terms))
        << i;
  }
}

TEST_F(GpuKernels, SoftmaxCrossEntropyWithinAFloatUlp) {
  const int64_t rows = 64, classes = 1000;
  const Tensor logits = host_random({rows, classes}, -20.f, 20.f);
  Tensor labels = host_zeros({rows}, DType::kI64);
  for (int64_t r = 0; r < rows; ++r) labels.data<int64_t>()[r] = rng.below(classes);
  Tensor probs = host_zeros({rows, classes}), loss = host_zeros({1});
  cpu.softmax_cross_entropy(logits, labels, probs, loss);
  Tensor dl = on_device(logits), dlab = on_device(labels);
  Tensor dprobs = on_device(host_zeros({rows, classes})), dloss = on_device(host_zeros({1}));
  // Scratch as the backend lays it out: maxima, sums and terms per row, then their sum (doubles:
  // 2 floats' bytes each).
  Tensor scratch = gpu->empty({rows * 8 + 2}, DType::kF32, MemCategory::kWorkspace, "scratch");
  auto* maxes = static_cast<RowMax*>(scratch.raw());
  auto* sums = reinterpret_cast<RowSum*>(maxes + rows);
  auto* terms = reinterpret_cast<double*>(sums + rows);
  auto* total = reinterpret_cast<RowSum*>(terms + rows);
  const ChannelRows by_row{rows, classes, false};
  launch_channel_reduce(gpu->stream(), rows, classes, 1,
                        SoftmaxRowMax<float>{dl.data<float>(), by_row}, maxes);
  launch_channel_reduce(gpu->stream(), rows, classes, 1,
                        SoftmaxRowSum<float>{dl.data<float>(), maxes, by_row}, sums);
  launch_for_each(gpu->stream(), rows * classes,
                  SoftmaxProbabilities<float>{dl.data<float>(), dlab.data<int64_t>(), classes,
                                              maxes, sums, dprobs.data<float>(), terms});
  launch_channel_reduce(gpu->stream(), 1, rows, 1, LossTermsSum{terms, ChannelRows{1, rows, false}},
                        total);
  launch_for_each(gpu->stream(), 1, LossMean{total, rows, dloss.data<float>()});
  const std::vector<float> gprobs = back(dprobs), gloss = back(dloss);
  for (int64_t i = 0; i < rows * classes; ++i) {
    ASSERT_NEAR(gprobs[i], probs.data<float>()[i], FLT_EPSILON * probs.data<float>()[i]) << i;
  }
  EXPECT_NEAR(gloss[0], loss.data<float>()[0], FLT_EPSILON * loss.data<float>()[0]);
}

TEST_F(GpuKernels, AdaptiveAvgPoolIsExact) {
  const Shape in{4, 8, 13, 11}, out{4, 8, 6, 4};
  const Nchw in_layout{8, 13, 11, false}, out_layout{8, 6, 4, false};
  const Tensor x = host_random(in), g = host_random(out);
  Tensor y = host_zeros(out), dxr = host_zeros(in);
  cpu.adaptive_avg_pool_forward(x, y);
  cpu.adaptive_avg_pool_backward(g, dxr);
  Tensor dx = on_device(x), dg = on_device(g);
  Tensor dy = on_device(host_zeros(out)), ddx = on_device(host_zeros(in));
  launch_for_each(
      gpu->stream(), y.numel(),
      AdaptiveAvgPoolForward<float>{dx.data<float>(), in_layout, out_layout, dy.data<float>()});
  launch_for_each(
      gpu->stream(), dxr.numel(),
      AdaptiveAvgPoolBackward<float>{dg.data<float>(), in_layout, out_layout, ddx.data<float>()});
  EXPECT_EQ(back(dy), values(y));
  EXPECT_EQ(back(ddx), values(dxr));
}

// The batch-norm kernels (what runs when cuDNN has no engine for a shape), on the device: within
// a few float roundings of the output's scale (Welford and double sums over a block's tree; FMAs
// in the float affine).
TEST_F(GpuKernels, BatchNormKernelsMatchTheCpuBackend) {
  const int64_t n = 8, c = 32, inner = 49, m = n * inner;
  const ChannelRows layout{c, inner, false};
  const Shape s{n, c, 7, 7};
  const Tensor x = host_random(s), gamma = host_random({c}), beta = host_random({c});
  const Tensor dy = host_random(s);
  Tensor rm = host_zeros({c}), rv = host_zeros({c}), mean = host_zeros({c}), inv = host_zeros({c});
  Tensor y = host_zeros(s), dx = host_zeros(s), dg = host_zeros({c}), db = host_zeros({c});
  cpu.fill(rv, 1.f);
  Tensor d_x = on_device(x), d_g = on_device(gamma), d_b = on_device(beta), d_dy = on_device(dy);
  Tensor d_rm = on_device(rm), d_rv = on_device(rv), d_mean = on_device(mean);
  Tensor d_inv = on_device(inv), d_y = on_device(y), d_dx = on_device(dx);
  Tensor d_dg = on_device(dg), d_db = on_device(db);
  cpu.batch_norm_train(x, gamma, beta, rm, rv, mean, inv, y, 0.1f, 1e-5f);
  cpu.batch_norm_backward(x, dy, gamma, mean, inv, dx, dg, db);
  // Three parts per channel (as a large N * H * W is split), each a block of 256 threads.
  const int64_t parts = 3;
  Tensor scratch = gpu->empty({2 * (3 * c * parts + 4 * c)}, DType::kF32, MemCategory::kWorkspace,
                              "s");  // 3 doubles per accumulator, 4 per channel
  auto* moments = static_cast<Welford*>(scratch.raw());
  auto* sums = static_cast<SumPair*>(scratch.raw());
  auto* channel = reinterpret_cast<double*>(moments + c * parts);
  const StreamRef st = gpu->stream();
  launch_channel_reduce(st, c, m, parts, BatchNormMoments<float>{d_x.data<float>(), layout},
                        moments);
  launch_for_each(st, c,
                  BatchNormStatistics{moments, parts, d_g.data<float>(), d_b.data<float>(), 1e-5f,
                                      0.1f, channel, d_mean.data<float>(), d_inv.data<float>(),
                                      d_rm.data<float>(), d_rv.data<float>()});
  launch_for_each(st, x.numel(),
                  BatchNormNormalize<float>{d_x.data<float>(), channel, layout, d_y.data<float>()});
  launch_channel_reduce(
      st, c, m, parts,
      BatchNormBackwardSums<float>{d_x.data<float>(), d_dy.data<float>(), d_mean.data<float>(),
                                   d_inv.data<float>(), layout},
      sums);
  launch_for_each(
      st, c,
      BatchNormBackwardChannel<float>{sums, parts, m, d_g.data<float>(), d_inv.data<float>(),
                                      channel, d_dg.data<float>(), d_db.data<float>()});
  launch_for_each(
      st, x.numel(),
      BatchNormBackwardData<float>{d_x.data<float>(), d_dy.data<float>(), d_mean.data<float>(),
                                   d_inv.data<float>(), channel, layout, d_dx.data<float>()});
  auto close = [&](const Tensor& d, const Tensor& want, const char* what) {
    const std::vector<float> got = back(d);
    double scale = 0, worst = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      scale = std::max(scale, std::fabs(static_cast<double>(want.data<float>()[i])));
      worst = std::max(worst, std::fabs(got[i] - static_cast<double>(want.data<float>()[i])));
    }
    EXPECT_LE(worst, 4 * FLT_EPSILON * scale) << what;
  };
  close(d_y, y, "y");
  close(d_mean, mean, "mean");
  close(d_inv, inv, "1/sqrt(var + eps)");
  close(d_rm, rm, "running mean");
  close(d_rv, rv, "running var");
  close(d_dx, dx, "dx");
  close(d_dg, dg, "dgamma");
  close(d_db, db, "dbeta");
}

// The reduction where its hard parts run: channels split into parts (reduce_parts: 6 of 16,725
// values each), every thread folding about 65 values, all eight warps merged, in both layouts.
// Against the same threads and tree run on the host: the counts exactly (every value once), the
// moments within the updating algorithm's bound (n kappa u per side, Chan, Golub and LeVeque),
// since nvcc fuses multiply-adds the host does not.
TEST_F(GpuKernels, ChannelReductionMatchesItsHostTreeInBothLayouts) {
  const int64_t n = 32, c = 32, inner = 56 * 56, m = n * inner;
  const int64_t parts = reduce_parts(c, m);
  ASSERT_GT(parts, 1);
  const Tensor x = host_random({n, c, 56, 56}, 1.f, 3.f);
  const Tensor d_x = on_device(x);
  Tensor scratch = gpu->empty({6 * c * parts}, DType::kF32, MemCategory::kWorkspace, "moments");
  for (const bool channels_last : {false, true}) {
    const ChannelRows layout{c, inner, channels_last};
    std::vector<Welford> want(c * parts), got(c * parts);
    reduce_channels_on_host(BatchNormMoments<float>{x.data<float>(), layout}, c, m, parts,
                            want.data());
    launch_channel_reduce(gpu->stream(), c, m, parts,
                          BatchNormMoments<float>{d_x.data<float>(), layout},
                          static_cast<Welford*>(scratch.raw()));
    gpu->synchronize();
    gpu->copy_to_host(scratch, got.data());
    for (int64_t i = 0; i < c * parts; ++i) {
      const Welford& w = want[i];
      ASSERT_EQ(got[i].count, w.count) << channels_last << " " << i;
      const double var = w.m2 / w.count, u = 0x1p-53;
      const double kappa = std::sqrt(1 + w.mean * w.mean / var);
      EXPECT_NEAR(got[i].mean, w.mean, 2 * w.count * u * std::fabs(w.mean)) << i;
      EXPECT_NEAR(got[i].m2, w.m2, 2 * w.count * kappa * u * w.m2) << i;
    }
  }
}

}  // namespace
}  // namespace dlb::cuda

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (dlb::skip_without_gpu()) return dlb::kSkippedExitCode;
  return RUN_ALL_TESTS();
}
