// Inverted dropout: kept values are scaled by 1/(1-p) in training, so inference is the identity.
// Element i is dropped when counter_uniform(seed, i) < p: the CUDA backend draws the same mask.
// The seed is the step's (DropoutSeed): a base plus the step counter, which increment moves.
#include <fmt/format.h>

#include <initializer_list>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/f32_views.h"
#include "runtime/backend/cpu/parallel.h"
#include "runtime/core/counter_hash.h"
#include "runtime/core/error.h"
#include "runtime/core/half.h"

namespace dlb {
namespace {

// A counter's one int64 (the step counter, num_batches_tracked).
int64_t& counter(const Tensor& step) {
  if (step.dtype() != DType::kI64 || step.numel() != 1) {
    throw InvalidArgument(fmt::format("a step counter is one int64, not {} {}",
                                      dtype_name(step.dtype()), step.shape().str()));
  }
  return *step.data<int64_t>();
}

// The mask is drawn by stored index, so the input, mask and output must store their elements in
// one order (a 4-D dropout in a channels-last run draws another mask than NCHW's: the same
// distribution, not the same bits; no reference model has one).
void check_one_layout(std::initializer_list<const Tensor*> tensors, const char* what) {
  if (!one_layout(tensors)) {
    throw InvalidArgument(fmt::format("{}: its tensors are stored in different layouts", what));
  }
}

}  // namespace

void CpuBackend::dropout_forward(const Tensor& x_s, float p, const DropoutSeed& draw,
                                 Tensor& mask_s, Tensor& y_s) {
  check_one_layout({&x_s, &mask_s, &y_s}, "dropout");
  F32Views f32(*this);
  const Tensor& x = f32.in(x_s);
  Tensor& mask = f32.out(mask_s);
  Tensor& y = f32.out(y_s);
  check_same_shape(x, y, "dropout");
  check_same_shape(x, mask, "dropout mask");
  // What the mask stores (1/(1-p) rounded to its type), so forward scales as backward will.
  const float keep_scale = stored_value(1.f / (1.f - p), mask_s.dtype());
  const uint64_t seed = draw.base + (draw.step ? static_cast<uint64_t>(counter(*draw.step)) : 0);
  float* m = mask.data<float>();
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  // Element i's draw depends on i alone, so any split of the range draws the same mask.
  parallel_blocks(x.numel(), kParallelElements, [=](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      m[i] = counter_uniform(seed, static_cast<uint64_t>(i)) < p ? 0.f : keep_scale;
      yp[i] = xp[i] * m[i];
    }
  });
}

void CpuBackend::increment(Tensor& c) { ++counter(c); }

void CpuBackend::dropout_backward(const Tensor& dy_s, const Tensor& mask_s, Tensor& dx_s) {
  check_one_layout({&dy_s, &mask_s, &dx_s}, "dropout backward");
  F32Views f32(*this);
  const Tensor& dy = f32.in(dy_s);
  const Tensor& mask = f32.in(mask_s);
  Tensor& dx = f32.out(dx_s);
  check_same_shape(dy, mask, "dropout backward");
  const float* g = dy.data<float>();
  const float* m = mask.data<float>();
  float* out = dx.data<float>();
  parallel_blocks(dy.numel(), kParallelElements, [=](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = g[i] * m[i];
  });
}

}  // namespace dlb
