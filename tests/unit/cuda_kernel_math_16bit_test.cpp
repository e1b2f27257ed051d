// The CUDA backend's own kernels on fp16 and bf16 storage, checked here without a GPU: each
// functor of runtime/backend/cuda/*_kernels.h runs on the host over every index on 16-bit tensors,
// against the CPU backend's ops on the same tensors (which compute on f32 copies and round on
// store, runtime/backend/cpu/f32_views.h). Both load the same 16-bit values exactly, do the same
// float and double operations in the same order and round once to nearest even with the same
// integer code (runtime/core/half.h), so most results must be equal bit for bit. Where the two
// group a double sum differently (bias and batch-norm sums), the float results may straddle a
// rounding boundary: those are allowed one unit in the last place of the 16-bit type.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cuda/batch_norm_kernels.h"
#include "runtime/backend/cuda/bias_kernels.h"
#include "runtime/backend/cuda/elementwise_kernels.h"
#include "runtime/backend/cuda/loss_kernels.h"
#include "runtime/backend/cuda/optimizer_kernels.h"
#include "runtime/backend/cuda/pooling_kernels.h"
#include "runtime/core/half.h"
#include "runtime/core/rng.h"
#include "tests/channels_last_bytes.h"

namespace dlb::cuda {
namespace {

template <typename F>
void run_on_host(int64_t n, const F& f) {
  for (int64_t i = 0; i < n; ++i) f(i);
}

template <typename T>
class KernelMath16 : public ::testing::Test {
 protected:
  static constexpr DType kType = StorageDType<T>::value;
  // The spacing of T's values just above 1: 2^-10 for fp16, 2^-7 for bf16.
  static constexpr double kUlp1 = kType == DType::kF16 ? 1.0 / 1024 : 1.0 / 128;

  Tensor floats(const Shape& s, float lo = -2.f, float hi = 2.f) {
    std::vector<float> v(s.numel());
    for (float& x : v) x = rng.uniform(lo, hi);
    Tensor t = cpu.empty(s, DType::kF32, MemCategory::kActivations, "t");
    cpu.copy_from_host(v.data(), t);
    return t;
  }
  Tensor random(const Shape& s, float lo = -2.f, float hi = 2.f) {
    Tensor t = zeros(s);
    cpu.cast(floats(s, lo, hi), t);
    return t;
  }
  Tensor zeros(const Shape& s, DType dtype = kType) {
    Tensor t = cpu.empty(s, dtype, MemCategory::kActivations, "t");
    cpu.fill(t, 0.f);
    return t;
  }
  Tensor copy_of(const Tensor& t) {
    Tensor c = zeros(t.shape(), t.dtype());
    cpu.copy(t, c);
    return c;
  }
  static T* p(const Tensor& t) { return static_cast<T*>(t.raw()); }
  static float* f(const Tensor& t) { return t.data<float>(); }
  // The stored bytes: equal where the values are, NaNs included.
  static std::vector<uint8_t> bytes(const Tensor& t) {
    const auto* b = static_cast<const uint8_t*>(t.raw());
    return {b, b + t.bytes()};
  }
  std::vector<float> wide(const Tensor& t) {
    std::vector<float> out(static_cast<size_t>(t.numel()));
    dtype_to_floats(t.raw(), t.numel(), t.dtype(), out.data());
    return out;
  }
  // Equal, or one unit in T's last place apart (of the larger magnitude).
  void within_one_ulp(const Tensor& got, const Tensor& want, const char* what) {
    const std::vector<float> g = wide(got), w = wide(want);
    for (size_t i = 0; i < w.size(); ++i) {
      const double mag = std::max(std::fabs(g[i]), std::fabs(w[i]));
      EXPECT_LE(std::fabs(static_cast<double>(g[i]) - w[i]), mag * kUlp1)
          << what << " at " << i << ": " << g[i] << " vs " << w[i];
    }
  }
  CpuBackend cpu{{}};
  Rng rng{11};
};

struct StorageNames {
  template <typename T>
  static std::string GetName(int) {
    return std::string(dtype_name(StorageDType<T>::value));
  }
};
using Storages = ::testing::Types<F16, BF16>;
TYPED_TEST_SUITE(KernelMath16, Storages, StorageNames);

const Shape kShape{3, 5, 7, 9};

TYPED_TEST(KernelMath16, ReluAddAndAccumulate) {
  using T = TypeParam;
  Tensor x = this->random(kShape);
  const Tensor dy = this->random(kShape), b = this->random(kShape);
  Tensor nan = this->zeros({1});
  this->cpu.fill(nan, NAN);
  std::memcpy(this->p(x) + 5, nan.raw(), sizeof(T));  // propagates, as on the CPU
  Tensor y_ref = this->zeros(kShape), y = this->zeros(kShape);
  this->cpu.relu_forward(x, y_ref);
  run_on_host(x.numel(), ReluForward<T>{this->p(x), this->p(y)});
  EXPECT_EQ(this->bytes(y), this->bytes(y_ref));
  Tensor dx_ref = this->zeros(kShape), dx = this->zeros(kShape);
  this->cpu.relu_backward(y_ref, dy, dx_ref);
  run_on_host(x.numel(), ReluBackward<T>{this->p(y_ref), this->p(dy), this->p(dx)});
  EXPECT_EQ(this->bytes(dx), this->bytes(dx_ref));

  Tensor sum_ref = this->zeros(kShape), sum = this->zeros(kShape);
  this->cpu.add(dy, b, sum_ref);
  run_on_host(x.numel(), Add<T>{this->p(dy), this->p(b), this->p(sum)});
  EXPECT_EQ(this->bytes(sum), this->bytes(sum_ref));
  Tensor acc_ref = this->copy_of(b), acc = this->copy_of(b);
  this->cpu.accumulate(dy, acc_ref);
  run_on_host(x.numel(), Accumulate<T>{this->p(dy), this->p(acc)});
  EXPECT_EQ(this->bytes(acc), this->bytes(acc_ref));
}

TYPED_TEST(KernelMath16, DropoutMasksAndScalesAsTheCpu) {
  using T = TypeParam;
  const Shape s{4, 2500};
  const Tensor x = this->random(s), dy = this->random(s);
  const float p = 0.3f;  // 1/(1-p) is not a 16-bit value: the mask stores it rounded
  Tensor mask_ref = this->zeros(s), y_ref = this->zeros(s), mask = this->zeros(s),
         y = this->zeros(s);
  this->cpu.dropout_forward(x, p, 77, mask_ref, y_ref);
  run_on_host(x.numel(), DropoutForward<T>{this->p(x), p, 77, nullptr, this->p(mask), this->p(y)});
  EXPECT_EQ(this->bytes(mask), this->bytes(mask_ref));
  EXPECT_EQ(this->bytes(y), this->bytes(y_ref));
  Tensor dx_ref = this->zeros(s), dx = this->zeros(s);
  this->cpu.dropout_backward(dy, mask_ref, dx_ref);
  run_on_host(x.numel(), DropoutBackward<T>{this->p(dy), this->p(mask), this->p(dx)});
  EXPECT_EQ(this->bytes(dx), this->bytes(dx_ref));
}

PoolDesc pool(PoolMode m, int64_t k, int64_t s, int64_t pad) {
  PoolDesc p;
  p.mode = m;
  p.kernel_h = p.kernel_w = k;
  p.stride_h = p.stride_w = s;
  p.pad_h = p.pad_w = pad;
  return p;
}

TYPED_TEST(KernelMath16, PoolingForwardAndBackward) {
  using T = TypeParam;
  for (const PoolDesc& p : {pool(PoolMode::kMax, 3, 2, 1), pool(PoolMode::kAvg, 3, 2, 1)}) {
    const int64_t h = 15, w = 14;
    const int64_t oh = (h + 2 * p.pad_h - p.kernel_h) / p.stride_h + 1;
    const int64_t ow = (w + 2 * p.pad_w - p.kernel_w) / p.stride_w + 1;
    const Shape in{2, 3, h, w}, out{2, 3, oh, ow};
    const Tensor x = this->random(in), dy = this->random(out);
    Tensor y_ref = this->zeros(out), y = this->zeros(out);
    Tensor dx_ref = this->zeros(in), dx = this->zeros(in);
    this->cpu.pool_forward(p, x, y_ref);
    run_on_host(y.numel(), PoolForward<T>{p, this->p(x), Nchw{3, h, w, false},
                                          Nchw{3, oh, ow, false}, this->p(y)});
    EXPECT_EQ(this->bytes(y), this->bytes(y_ref)) << static_cast<int>(p.mode);
    this->cpu.pool_backward(p, x, y_ref, dy, dx_ref);
    run_on_host(dx.numel(), PoolBackward<T>{p, this->p(x), this->p(dy), Nchw{3, h, w, false},
                                            Nchw{3, oh, ow, false}, this->p(dx)});
    EXPECT_EQ(this->bytes(dx), this->bytes(dx_ref)) << static_cast<int>(p.mode);
  }
  const Shape in{2, 3, 13, 11}, out{2, 3, 6, 4};
  const Tensor x = this->random(in), dy = this->random(out);
  Tensor y_ref = this->zeros(out), y = this->zeros(out);
  Tensor dx_ref = this->zeros(in), dx = this->zeros(in);
  this->cpu.adaptive_avg_pool_forward(x, y_ref);
  run_on_host(y.numel(), AdaptiveAvgPoolForward<T>{this->p(x), Nchw{3, 13, 11, false},
                                                   Nchw{3, 6, 4, false}, this->p(y)});
  EXPECT_EQ(this->bytes(y), this->bytes(y_ref));
  this->cpu.adaptive_avg_pool_backward(dy, dx_ref);
  run_on_host(dx.numel(), AdaptiveAvgPoolBackward<T>{this->p(dy), Nchw{3, 13, 11, false},
                                                     Nchw{3, 6, 4, false}, this->p(dx)});
  EXPECT_EQ(this->bytes(dx), this->bytes(dx_ref));
}

TYPED_TEST(KernelMath16, BiasAddAndItsGradient) {
  using T = TypeParam;
  const Tensor b = this->random(Shape{5}), dy = this->random(kShape);
  Tensor y_ref = this->random(kShape);
  Tensor y = this->copy_of(y_ref);
  this->cpu.bias_add(b, y_ref);
  const int64_t inner = 7 * 9;
  run_on_host(y.numel(), BiasAdd<T>{this->p(b), ChannelRows{5, inner, false}, this->p(y)});
  EXPECT_EQ(this->bytes(y), this->bytes(y_ref));
  Tensor db_ref = this->zeros(Shape{5}), db = this->zeros(Shape{5});
  this->cpu.bias_backward(dy, db_ref);
  std::vector<double> partials(3 * 5 * 4), rows(3 * 5);
  run_on_host(3 * 5 * 4,
              BiasPartialSums<T>{this->p(dy), ChannelRows{5, inner, false}, 4, partials.data()});
  run_on_host(3 * 5, BiasLaneSum{partials.data(), 5, 4, rows.data()});
  run_on_host(5, BiasChannelSum<T>{rows.data(), 3, 5, this->p(db)});
  this->within_one_ulp(db, db_ref, "db");
}

TYPED_TEST(KernelMath16, BatchNormKernelsAreTheCpuBackends) {
  // 16-bit data; scale, shift and statistics in f32; parameter gradients in 16 bits. The sums are
  // in double on both sides, grouped differently: the f32 statistics agree to two float
  // roundings, and the 16-bit outputs are equal or one 16-bit unit apart.
  using T = TypeParam;
  const Shape s{4, 6, 5, 3}, c{6};
  const int64_t n = 4, channels = 6, inner = 15, m = n * inner;
  const ChannelRows layout{channels, inner, false};
  const Tensor x = this->random(s, -3.f, 5.f), dy = this->random(s);
  const Tensor gamma = this->floats(c), beta = this->floats(c);
  Tensor rm_ref = this->floats(c, 0.f, 1.f), rv_ref = this->floats(c, 0.5f, 2.f);
  Tensor rm = this->copy_of(rm_ref), rv = this->copy_of(rv_ref);
  Tensor mean_ref = this->zeros(c, DType::kF32), inv_ref = this->zeros(c, DType::kF32);
  Tensor mean = this->zeros(c, DType::kF32), inv = this->zeros(c, DType::kF32);
  Tensor y_ref = this->zeros(s), y = this->zeros(s);
  this->cpu.batch_norm_train(x, gamma, beta, rm_ref, rv_ref, mean_ref, inv_ref, y_ref, 0.1f, 1e-5f);
  const int64_t parts = 2;
  std::vector<Welford> moments(channels * parts);
  std::vector<SumPair> sums(channels * parts);
  std::vector<double> channel(4 * channels);
  reduce_channels_on_host(BatchNormMoments<T>{this->p(x), layout}, channels, m, parts,
                          moments.data());
  run_on_host(channels, BatchNormStatistics{moments.data(), parts, this->f(gamma), this->f(beta),
                                            1e-5f, 0.1f, channel.data(), this->f(mean),
                                            this->f(inv), this->f(rm), this->f(rv)});
  run_on_host(x.numel(), BatchNormNormalize<T>{this->p(x), channel.data(), layout, this->p(y)});
  for (const auto& [got, want] : {std::pair<const Tensor*, const Tensor*>{&mean, &mean_ref},
                                  {&inv, &inv_ref},
                                  {&rm, &rm_ref},
                                  {&rv, &rv_ref}}) {
    for (int64_t i = 0; i < channels; ++i) {
      EXPECT_NEAR(this->f(*got)[i], this->f(*want)[i], 2.4e-7 * std::fabs(this->f(*want)[i]));
    }
  }
  this->within_one_ulp(y, y_ref, "y");

  Tensor dx_ref = this->zeros(s), dg_ref = this->zeros(c), db_ref = this->zeros(c);
  Tensor dx = this->zeros(s), dg = this->zeros(c), db = this->zeros(c);
  this->cpu.batch_norm_backward(x, dy, gamma, mean_ref, inv_ref, dx_ref, dg_ref, db_ref);
  reduce_channels_on_host(BatchNormBackwardSums<T>{this->p(x), this->p(dy), this->f(mean_ref),
                                                   this->f(inv_ref), layout},
                          channels, m, parts, sums.data());
  run_on_host(channels,
              BatchNormBackwardChannel<T>{sums.data(), parts, m, this->f(gamma), this->f(inv_ref),
                                          channel.data(), this->p(dg), this->p(db)});
  run_on_host(x.numel(),
              BatchNormBackwardData<T>{this->p(x), this->p(dy), this->f(mean_ref), this->f(inv_ref),
                                       channel.data(), layout, this->p(dx)});
  this->within_one_ulp(dg, dg_ref, "dgamma");
  this->within_one_ulp(db, db_ref, "dbeta");
  this->within_one_ulp(dx, dx_ref, "dx");

  Tensor yi_ref = this->zeros(s), yi = this->zeros(s);
  this->cpu.batch_norm_infer(x, gamma, beta, rm_ref, rv_ref, yi_ref, 1e-5f);
  run_on_host(x.numel(),
              BatchNormInfer<T>{this->p(x), this->f(gamma), this->f(beta), this->f(rm_ref),
                                this->f(rv_ref), 1e-5f, layout, this->p(yi)});
  EXPECT_EQ(this->bytes(yi), this->bytes(yi_ref));
}

TYPED_TEST(KernelMath16, SoftmaxCrossEntropyOfSixteenBitLogits) {
  using T = TypeParam;
  const int64_t rows = 7, classes = 1000;
  const Tensor logits = this->random({rows, classes}, -8.f, 8.f);
  Tensor labels = this->cpu.empty({rows}, DType::kI64, MemCategory::kData, "labels");
  for (int64_t r = 0; r < rows; ++r) labels.data<int64_t>()[r] = this->rng.below(classes);
  Tensor probs_ref = this->zeros({rows, classes}, DType::kF32);
  Tensor loss_ref = this->zeros({1}, DType::kF32);
  this->cpu.softmax_cross_entropy(logits, labels, probs_ref, loss_ref);
  Tensor probs = this->zeros({rows, classes}, DType::kF32), loss = this->zeros({1}, DType::kF32);
  softmax_cross_entropy_on_host(this->p(logits), labels.data<int64_t>(), rows, classes,
                                this->f(probs), this->f(loss));
  // f32 outputs: equal to the CPU's, or one float rounding apart (the trees' grouping of the
  // double sums; cuda_kernel_math_test.cpp).
  for (int64_t i = 0; i < rows * classes; ++i) {
    const float want = this->f(probs_ref)[i];
    ASSERT_LE(std::fabs(this->f(probs)[i] - want), FLT_EPSILON * std::fabs(want)) << i;
  }
  EXPECT_LE(std::fabs(this->f(loss)[0] - this->f(loss_ref)[0]),
            FLT_EPSILON * std::fabs(this->f(loss_ref)[0]));

  Tensor d_ref = this->zeros({rows, classes}), d = this->zeros({rows, classes});
  this->cpu.softmax_cross_entropy_backward(probs_ref, labels, d_ref);
  run_on_host(rows * classes, SoftmaxCrossEntropyBackward<T>{this->f(probs), labels.data<int64_t>(),
                                                             nullptr, rows, classes, this->p(d)});
  EXPECT_EQ(this->bytes(d), this->bytes(d_ref));
  // Scaled before rounding: 2^-24 / 7 underflows fp16, times 2^16 does not.
  Tensor scaler = this->zeros({kLossScaleSlots}, DType::kF32);
  this->f(scaler)[kScaleSlot] = 65536.f;
  this->cpu.softmax_cross_entropy_backward_scaled(probs_ref, labels, scaler, d_ref);
  run_on_host(rows * classes,
              SoftmaxCrossEntropyBackward<T>{this->f(probs), labels.data<int64_t>(),
                                             this->f(scaler), rows, classes, this->p(d)});
  EXPECT_EQ(this->bytes(d), this->bytes(d_ref));
}

TYPED_TEST(KernelMath16, SgdUpdatesMasterWeightsAndWritesTheCopyInOnePass) {
  using T = TypeParam;
  const Shape s{1001};
  const Tensor grad = this->random(s, -1e-2f, 1e-2f);
  const SgdConfig cfg{0.05f, 0.9f, 1e-3f};
  Tensor scaler = this->zeros({kLossScaleSlots}, DType::kF32);
  this->f(scaler)[kScaleSlot] = 512.f;
  // Plain, then with loss scaling (the gradient times 1/512), three steps each.
  for (const Tensor* state :
       {static_cast<const Tensor*>(nullptr), static_cast<const Tensor*>(&scaler)}) {
    const Tensor buf0 = this->floats(s), param0 = this->floats(s);
    Tensor buf_ref = this->copy_of(buf0), param_ref = this->copy_of(param0);
    Tensor buf = this->copy_of(buf0), param = this->copy_of(param0);
    Tensor copy_ref = this->zeros(s), copy = this->zeros(s);
    for (int step = 0; step < 3; ++step) {
      this->cpu.sgd_update_with_copy(cfg, grad, state, buf_ref, param_ref, copy_ref);
      run_on_host(s.numel(), SgdUpdate<T>{cfg,
                                          this->p(grad),
                                          state ? this->f(*state) : nullptr,
                                          this->f(buf),
                                          this->f(param),
                                          this->p(copy),
                                          {}});
    }
    EXPECT_EQ(this->bytes(buf), this->bytes(buf_ref));
    EXPECT_EQ(this->bytes(param), this->bytes(param_ref));
    EXPECT_EQ(this->bytes(copy), this->bytes(copy_ref));  // the cast of the master weights
  }
  // A step with the found-inf slot set changes nothing.
  this->f(scaler)[kFoundInfSlot] = 1.f;
  const Tensor buf0 = this->floats(s), param0 = this->floats(s), copy0 = this->random(s);
  Tensor buf = this->copy_of(buf0), param = this->copy_of(param0), copy = this->copy_of(copy0);
  run_on_host(
      s.numel(),
      SgdUpdate<T>{
          cfg, this->p(grad), this->f(scaler), this->f(buf), this->f(param), this->p(copy), {}});
  EXPECT_EQ(this->bytes(buf), this->bytes(buf0));
  EXPECT_EQ(this->bytes(param), this->bytes(param0));
  EXPECT_EQ(this->bytes(copy), this->bytes(copy0));
}

// The multi-tensor update is each parameter's SgdUpdate, to the bit: slots of several sizes, one
// empty (skipped by the search), one a channels-last conv weight, with and without loss scaling
// and compute copies.
TYPED_TEST(KernelMath16, MultiTensorSgdIsEachParametersUpdate) {
  using T = TypeParam;
  const SgdConfig cfg{0.05f, 0.9f, 1e-3f};
  const std::vector<Shape> shapes{{1001}, {0}, {4, 5, 3, 3}, {37}};
  const std::vector<ToChannelsLast> layouts{{}, {}, {5, 9}, {}};
  Tensor scaler = this->zeros({kLossScaleSlots}, DType::kF32);
  this->f(scaler)[kScaleSlot] = 512.f;
  for (const Tensor* state :
       {static_cast<const Tensor*>(nullptr), static_cast<const Tensor*>(&scaler)}) {
    auto table = std::make_unique<MultiSgdUpdate<T>>();
    table->cfg = cfg;
    table->scaler = state ? this->f(*state) : nullptr;
    std::vector<Tensor> grads, bufs, params, copies, buf_refs, param_refs, copy_refs;
    int64_t total = 0;
    for (size_t k = 0; k < shapes.size(); ++k) {
      const Shape& s = shapes[k];
      grads.push_back(this->random(s, -1e-2f, 1e-2f));
      bufs.push_back(this->floats(s));
      params.push_back(this->floats(s));
      copies.push_back(this->zeros(s));
      buf_refs.push_back(this->copy_of(bufs.back()));
      param_refs.push_back(this->copy_of(params.back()));
      copy_refs.push_back(this->zeros(s));
      T* copy = k == 3 ? nullptr : this->p(copies.back());  // the last has none
      table->slots[table->count++] = {this->p(grads.back()),
                                      this->f(bufs.back()),
                                      this->f(params.back()),
                                      copy,
                                      layouts[k],
                                      total};
      total += s.numel();
    }
    for (int step = 0; step < 2; ++step) {
      run_on_host(total, *table);
      for (size_t k = 0; k < shapes.size(); ++k) {
        T* copy = k == 3 ? nullptr : this->p(copy_refs[k]);
        run_on_host(shapes[k].numel(),
                    SgdUpdate<T>{cfg, this->p(grads[k]), table->scaler, this->f(buf_refs[k]),
                                 this->f(param_refs[k]), copy, layouts[k]});
      }
    }
    for (size_t k = 0; k < shapes.size(); ++k) {
      EXPECT_EQ(this->bytes(bufs[k]), this->bytes(buf_refs[k])) << k;
      EXPECT_EQ(this->bytes(params[k]), this->bytes(param_refs[k])) << k;
      EXPECT_EQ(this->bytes(copies[k]), this->bytes(copy_refs[k])) << k;
    }
  }
}

TYPED_TEST(KernelMath16, FindsAnInfOrNaNAnywhereAsTheCpuDoes) {
  using T = TypeParam;
  const Shape s{999};
  const float planted[] = {INFINITY, -INFINITY, NAN};
  for (int64_t at : {int64_t{0}, int64_t{498}, int64_t{998}}) {
    for (float v : planted) {
      Tensor grads = this->random(s, -60000.f, 60000.f);  // large, finite: not found
      Tensor one = this->zeros({1});
      this->cpu.fill(one, v);
      std::memcpy(this->p(grads) + at, one.raw(), sizeof(T));
      Tensor ref = this->zeros({kLossScaleSlots}, DType::kF32);
      this->f(ref)[kScaleSlot] = 1024.f;
      Tensor state = this->copy_of(ref);
      this->cpu.find_non_finite(grads, ref);
      run_on_host(s.numel(), FindNonFinite<T>{this->p(grads), this->f(state)});
      EXPECT_EQ(this->f(ref)[kFoundInfSlot], 1.f) << v << " at " << at;
      EXPECT_EQ(this->bytes(state), this->bytes(ref)) << v << " at " << at;
    }
  }
  // Finite gradients: the slot stays clear, unless 1/scale is infinite (GradScaler's rule).
  for (float scale : {1024.f, 1e-45f}) {
    const Tensor grads = this->random(s, -60000.f, 60000.f);
    Tensor ref = this->zeros({kLossScaleSlots}, DType::kF32);
    this->f(ref)[kScaleSlot] = scale;
    Tensor state = this->copy_of(ref);
    this->cpu.find_non_finite(grads, ref);
    run_on_host(s.numel(), FindNonFinite<T>{this->p(grads), this->f(state)});
    EXPECT_EQ(this->f(state)[kFoundInfSlot], scale == 1024.f ? 0.f : 1.f);
    EXPECT_EQ(this->bytes(state), this->bytes(ref));
  }
}

TYPED_TEST(KernelMath16, CastsAndFillsAsTheCpu) {
  using T = TypeParam;
  // Ties, the fp16 overflow threshold, subnormals of both types, NaN and the infinities.
  const std::vector<float> special = {
      1.f + 1.f / 2048, 1.f + 3.f / 2048, 65504.f,        65519.f, 65520.f, -65520.f,
      5.96e-8f,         2.9e-8f,          1e-40f,         -0.f,    NAN,     INFINITY,
      -INFINITY,        3.1e38f,          1.f + 1.f / 256};
  Tensor src = this->cpu.empty({static_cast<int64_t>(special.size())}, DType::kF32,
                               MemCategory::kActivations, "special");
  this->cpu.copy_from_host(special.data(), src);
  const int64_t n = src.numel();
  Tensor narrow_ref = this->zeros({n}), narrow = this->zeros({n});
  this->cpu.cast(src, narrow_ref);
  run_on_host(n, Cast<float, T>{this->f(src), this->p(narrow), {}});
  EXPECT_EQ(this->bytes(narrow), this->bytes(narrow_ref));
  Tensor back_ref = this->zeros({n}, DType::kF32), back = this->zeros({n}, DType::kF32);
  this->cpu.cast(narrow_ref, back_ref);
  run_on_host(n, Cast<T, float>{this->p(narrow_ref), this->f(back), {}});
  EXPECT_EQ(this->bytes(back), this->bytes(back_ref));
  // Into the other 16-bit type, through float.
  const DType other = this->kType == DType::kF16 ? DType::kBF16 : DType::kF16;
  Tensor cross_ref = this->zeros({n}, other), cross = this->zeros({n}, other);
  this->cpu.cast(narrow_ref, cross_ref);
  with_storage(other, "other", [&](auto tag) {
    using O = decltype(tag);
    run_on_host(n, Cast<T, O>{this->p(narrow_ref), static_cast<O*>(cross.raw()), {}});
  });
  EXPECT_EQ(this->bytes(cross), this->bytes(cross_ref));

  for (float v : special) {
    Tensor ref = this->zeros({9}), t = this->zeros({9});
    this->cpu.fill(ref, v);
    run_on_host(9, Fill<T>{this->p(t), stored<T>(v)});
    EXPECT_EQ(this->bytes(t), this->bytes(ref)) << v;
  }
}

// Channels-last (NHWC) storage, which the CUDA backend uses for 16-bit activations: every kernel
// that indexes by pixel or channel, run on NHWC tensors, must give the NCHW results reordered,
// bit for bit (each output sums the same terms in the same order, only from other addresses).

std::vector<uint8_t> nhwc_bytes(const Tensor& t) { return reordered_bytes(t); }

TEST(ChannelsLast, IndexersAgreeWithTheLayoutByHand) {
  // [2, 3, 2, 2]: element (1, 2, 0, 1) is at 12 + 8 + 1 = 21 in NCHW and at
  // ((1 * 2 + 0) * 2 + 1) * 3 + 2 = 17 in NHWC.
  const Nchw nchw{3, 2, 2, false}, nhwc{3, 2, 2, true};
  EXPECT_EQ(nchw.at(1, 2, 0, 1), 21);
  EXPECT_EQ(nhwc.at(1, 2, 0, 1), 17);
  for (const Nchw& l : {nchw, nhwc}) {
    for (int64_t i = 0; i < 24; ++i) {
      int64_t n, c, a, b;
      l.coords(i, n, c, a, b);
      EXPECT_EQ(l.at(n, c, a, b), i);
    }
  }
  EXPECT_EQ((ToChannelsLast{3, 4}(21)), 17);
  EXPECT_EQ((ToChannelsLast{}(21)), 21);
  const ChannelRows rows{3, 4, true};
  EXPECT_EQ(rows.channel_of(17), 2);
  EXPECT_EQ(rows.at(1 * 3 + 2, 0 * 2 + 1), 17);  // row (n 1, c 2), pixel 1
}

// Max pooling from the kept argmax (Backend::saves_pool_argmax) is the CPU's, to the bit: values
// on a coarse grid, so windows tie (the first maximum takes the gradient), and a NaN (the last
// NaN does); in NCHW against the CPU backend, and channels-last against those results reordered.
TYPED_TEST(KernelMath16, MaxPoolFromItsArgmaxIsTheCpus) {
  using T = TypeParam;
  const PoolDesc p = pool(PoolMode::kMax, 3, 2, 1);
  const Shape in{2, 3, 15, 14}, out{2, 3, 8, 7};
  Tensor x = this->random(in);
  for (int64_t i = 0; i < x.numel(); ++i) {  // a quarter-unit grid: ties in most windows
    this->p(x)[i] = stored<T>(std::round(load(this->p(x)[i]) * 2.f) / 4.f);
  }
  this->p(x)[40] = stored<T>(NAN);
  const Tensor dy = this->random(out);
  Tensor y_ref = this->zeros(out), dx_ref = this->zeros(in);
  this->cpu.pool_forward(p, x, y_ref);
  this->cpu.pool_backward(p, x, y_ref, dy, dx_ref);
  for (const bool cl : {false, true}) {
    const Nchw in_l{3, 15, 14, cl}, out_l{3, 8, 7, cl};
    Tensor xs = this->copy_of(x), dys = this->copy_of(dy);
    if (cl) {
      std::memcpy(xs.raw(), nhwc_bytes(x).data(), x.bytes());
      std::memcpy(dys.raw(), nhwc_bytes(dy).data(), dy.bytes());
    }
    Tensor y = this->zeros(out), dx = this->zeros(in);
    std::vector<int64_t> argmax(static_cast<size_t>(out.numel()), -1);
    run_on_host(y.numel(),
                MaxPoolForwardArgmax<T>{p, this->p(xs), in_l, out_l, this->p(y), argmax.data()});
    run_on_host(dx.numel(),
                MaxPoolBackwardArgmax<T>{p, argmax.data(), this->p(dys), in_l, out_l, this->p(dx)});
    EXPECT_EQ(this->bytes(y), cl ? nhwc_bytes(y_ref) : this->bytes(y_ref)) << cl;
    EXPECT_EQ(this->bytes(dx), cl ? nhwc_bytes(dx_ref) : this->bytes(dx_ref)) << cl;
  }
}

TYPED_TEST(KernelMath16, ChannelsLastKernelsReorderTheNchwResults) {
  using T = TypeParam;
  const Shape in{2, 5, 9, 7};
  const Tensor x = this->random(in), x_cl = this->copy_of(x);
  std::memcpy(x_cl.raw(), nhwc_bytes(x).data(), x.bytes());
  const Nchw in_l{5, 9, 7, false}, in_cl{5, 9, 7, true};
  // Pooling, NHWC -> NHWC and NHWC -> NCHW (a pool before a flatten), both passes.
  for (const PoolDesc& p : {pool(PoolMode::kMax, 3, 2, 1), pool(PoolMode::kAvg, 3, 2, 1)}) {
    const Shape out{2, 5, 5, 4};
    const Nchw out_l{5, 5, 4, false}, out_cl{5, 5, 4, true};
    const Tensor dy = this->random(out);
    Tensor dy_cl = this->copy_of(dy);
    std::memcpy(dy_cl.raw(), nhwc_bytes(dy).data(), dy.bytes());
    Tensor y = this->zeros(out), y_cl = this->zeros(out), y_mixed = this->zeros(out);
    run_on_host(y.numel(), PoolForward<T>{p, this->p(x), in_l, out_l, this->p(y)});
    run_on_host(y.numel(), PoolForward<T>{p, this->p(x_cl), in_cl, out_cl, this->p(y_cl)});
    run_on_host(y.numel(), PoolForward<T>{p, this->p(x_cl), in_cl, out_l, this->p(y_mixed)});
    EXPECT_EQ(this->bytes(y_cl), nhwc_bytes(y));
    EXPECT_EQ(this->bytes(y_mixed), this->bytes(y));
    Tensor dx = this->zeros(in), dx_cl = this->zeros(in), dx_mixed = this->zeros(in);
    run_on_host(dx.numel(), PoolBackward<T>{p, this->p(x), this->p(dy), in_l, out_l, this->p(dx)});
    run_on_host(dx.numel(),
                PoolBackward<T>{p, this->p(x_cl), this->p(dy_cl), in_cl, out_cl, this->p(dx_cl)});
    run_on_host(dx.numel(),
                PoolBackward<T>{p, this->p(x_cl), this->p(dy), in_cl, out_l, this->p(dx_mixed)});
    EXPECT_EQ(this->bytes(dx_cl), nhwc_bytes(dx));
    EXPECT_EQ(this->bytes(dx_mixed), nhwc_bytes(dx));
  }
  {  // adaptive average pooling to 3x2, NHWC -> NCHW as before alexnet's and vgg16's flatten
    const Shape out{2, 5, 3, 2};
    const Nchw out_l{5, 3, 2, false};
    const Tensor dy = this->random(out);
    Tensor y = this->zeros(out), y_mixed = this->zeros(out);
    run_on_host(y.numel(), AdaptiveAvgPoolForward<T>{this->p(x), in_l, out_l, this->p(y)});
    run_on_host(y.numel(),
                AdaptiveAvgPoolForward<T>{this->p(x_cl), in_cl, out_l, this->p(y_mixed)});
    EXPECT_EQ(this->bytes(y_mixed), this->bytes(y));
    Tensor dx = this->zeros(in), dx_mixed = this->zeros(in);
    run_on_host(dx.numel(), AdaptiveAvgPoolBackward<T>{this->p(dy), in_l, out_l, this->p(dx)});
    run_on_host(dx.numel(),
                AdaptiveAvgPoolBackward<T>{this->p(dy), in_cl, out_l, this->p(dx_mixed)});
    EXPECT_EQ(this->bytes(dx_mixed), nhwc_bytes(dx));
  }
  const ChannelRows rows_l{5, 63, false}, rows_cl{5, 63, true};
  {  // bias and its gradient
    const Tensor b = this->random(Shape{5});
    Tensor y = this->copy_of(x), y_cl = this->copy_of(x_cl);
    run_on_host(y.numel(), BiasAdd<T>{this->p(b), rows_l, this->p(y)});
    run_on_host(y.numel(), BiasAdd<T>{this->p(b), rows_cl, this->p(y_cl)});
    EXPECT_EQ(this->bytes(y_cl), nhwc_bytes(y));
    // The same partial sums, in the same places, from either layout.
    std::vector<double> sums(10 * 3), sums_cl(10 * 3);
    run_on_host(10 * 3, BiasPartialSums<T>{this->p(x), rows_l, 3, sums.data()});
    run_on_host(10 * 3, BiasPartialSums<T>{this->p(x_cl), rows_cl, 3, sums_cl.data()});
    EXPECT_EQ(sums_cl, sums);
  }
  {  // batch norm's kernels, both passes, and inference
    const Shape c{5};
    const Tensor gamma = this->floats(c), beta = this->floats(c), dy = this->random(in);
    Tensor dy_cl = this->copy_of(dy);
    std::memcpy(dy_cl.raw(), nhwc_bytes(dy).data(), dy.bytes());
    const auto train = [&](const Tensor& xs, const Tensor& dys, const ChannelRows& l, Tensor& y,
                           Tensor& dx, Tensor& dg, Tensor& db) {
      Tensor rm = this->zeros(c, DType::kF32), rv = this->zeros(c, DType::kF32);
      Tensor mean = this->zeros(c, DType::kF32), inv = this->zeros(c, DType::kF32);
      std::vector<Welford> moments(5);
      std::vector<SumPair> sums(5);
      std::vector<double> channel(20);
      reduce_channels_on_host(BatchNormMoments<T>{this->p(xs), l}, 5, 126, 1, moments.data());
      run_on_host(5, BatchNormStatistics{moments.data(), 1, this->f(gamma), this->f(beta), 1e-5f,
                                         0.1f, channel.data(), this->f(mean), this->f(inv),
                                         this->f(rm), this->f(rv)});
      run_on_host(xs.numel(), BatchNormNormalize<T>{this->p(xs), channel.data(), l, this->p(y)});
      reduce_channels_on_host(
          BatchNormBackwardSums<T>{this->p(xs), this->p(dys), this->f(mean), this->f(inv), l}, 5,
          126, 1, sums.data());
      run_on_host(5, BatchNormBackwardChannel<T>{sums.data(), 1, 126, this->f(gamma), this->f(inv),
                                                 channel.data(), this->p(dg), this->p(db)});
      run_on_host(xs.numel(),
                  BatchNormBackwardData<T>{this->p(xs), this->p(dys), this->f(mean), this->f(inv),
                                           channel.data(), l, this->p(dx)});
      Tensor yi = this->zeros(in);
      run_on_host(xs.numel(),
                  BatchNormInfer<T>{this->p(xs), this->f(gamma), this->f(beta), this->f(mean),
                                    this->f(inv), 1e-5f, l, this->p(yi)});
      return yi;
    };
    Tensor y = this->zeros(in), dx = this->zeros(in), dg = this->zeros(c), db = this->zeros(c);
    Tensor y_cl = this->zeros(in), dx_cl = this->zeros(in), dg_cl = this->zeros(c),
           db_cl = this->zeros(c);
    const Tensor yi = train(x, dy, rows_l, y, dx, dg, db);
    const Tensor yi_cl = train(x_cl, dy_cl, rows_cl, y_cl, dx_cl, dg_cl, db_cl);
    EXPECT_EQ(this->bytes(y_cl), nhwc_bytes(y));
    EXPECT_EQ(this->bytes(dx_cl), nhwc_bytes(dx));
    EXPECT_EQ(this->bytes(dg_cl), this->bytes(dg));
    EXPECT_EQ(this->bytes(db_cl), this->bytes(db));
    EXPECT_EQ(this->bytes(yi_cl), nhwc_bytes(yi));
  }
  {  // a conv weight [K, C, R, S]: its master NCHW, its 16-bit copy and gradient channels-last
    const Shape ws{4, 5, 3, 3};
    const ToChannelsLast to{5, 9};
    const Tensor master = this->floats(ws);
    Tensor copy = this->zeros(ws), copy_cl = this->zeros(ws);
    run_on_host(master.numel(), Cast<float, T>{this->f(master), this->p(copy), {}});
    run_on_host(master.numel(), Cast<float, T>{this->f(master), this->p(copy_cl), to});
    EXPECT_EQ(this->bytes(copy_cl), nhwc_bytes(copy));
    const Tensor grad = this->random(ws);
    Tensor grad_cl = this->copy_of(grad);
    std::memcpy(grad_cl.raw(), nhwc_bytes(grad).data(), grad.bytes());
    const SgdConfig cfg{0.05f, 0.9f, 1e-3f};
    Tensor p1 = this->copy_of(master), p2 = this->copy_of(master);
    Tensor m1 = this->zeros(ws, DType::kF32), m2 = this->zeros(ws, DType::kF32);
    run_on_host(
        master.numel(),
        SgdUpdate<T>{cfg, this->p(grad), nullptr, this->f(m1), this->f(p1), this->p(copy), {}});
    run_on_host(master.numel(), SgdUpdate<T>{cfg, this->p(grad_cl), nullptr, this->f(m2),
                                             this->f(p2), this->p(copy_cl), to});
    EXPECT_EQ(this->bytes(p2), this->bytes(p1));  // the masters, in torchvision's layout
    EXPECT_EQ(this->bytes(m2), this->bytes(m1));
    EXPECT_EQ(this->bytes(copy_cl), nhwc_bytes(copy));
  }
}

// GradScaler.update, one index, over a sequence with overflows: the same state as the CPU's
// after every step (the scale backs off, counts skipped steps, and grows after the interval).
TEST(LossScaleMath, UpdateFollowsTheCpuThroughASequence) {
  CpuBackend cpu{{}};
  const LossScaleConfig cfg{1024.f, 2.f, 0.5f, 3};
  Tensor ref = cpu.empty({kLossScaleSlots}, DType::kF32, MemCategory::kOptimizerState, "ref");
  Tensor state = cpu.empty({kLossScaleSlots}, DType::kF32, MemCategory::kOptimizerState, "s");
  const float initial[kLossScaleSlots] = {cfg.initial_scale, 0.f, 0.f, 0.f};
  cpu.copy_from_host(initial, ref);
  cpu.copy_from_host(initial, state);
  const bool overflow[] = {false, true, false, false, false, true, true, false, false, false};
  for (bool found : overflow) {
    ref.data<float>()[kFoundInfSlot] = state.data<float>()[kFoundInfSlot] = found ? 1.f : 0.f;
    cpu.update_loss_scale(cfg, ref);
    run_on_host(1, UpdateLossScale{cfg, state.data<float>()});
    for (int k = 0; k < kLossScaleSlots; ++k) {
      EXPECT_EQ(state.data<float>()[k], ref.data<float>()[k]) << "slot " << k;
    }
  }
  EXPECT_EQ(state.data<float>()[kSkippedSlot], 3.f);
  // 1024 -> 512 (a skip) -> 3 clean steps: 1024 -> two skips: 256 -> 3 clean steps: 512.
  EXPECT_EQ(state.data<float>()[kScaleSlot], 512.f);
  // Growth that would overflow keeps the scale.
  state.data<float>()[kScaleSlot] = 3e38f;
  state.data<float>()[kCleanStepsSlot] = 2.f;
  state.data<float>()[kFoundInfSlot] = 0.f;
  run_on_host(1, UpdateLossScale{cfg, state.data<float>()});
  EXPECT_EQ(state.data<float>()[kScaleSlot], 3e38f);
}

}  // namespace
}  // namespace dlb::cuda
