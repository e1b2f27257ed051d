// The CPU backend's element-wise loops on raw storage: the residual sum, the ReLU and its
// backward, the conversions between f32 and 16-bit storage, and the update of SGD with momentum
// (with its 16-bit compute copy). Each element is loaded into a float, computed in float and
// rounded once on store (runtime/core/stored_float.h). Compiled for x86-64 and for AVX-512
// (runtime/backend/cpu/isa.h), the same bits on both. A caller splits [0, n) over its threads.
#pragma once
#include <cstdint>

#include "runtime/backend/cpu/isa.h"
#include "runtime/core/stored_float.h"

namespace dlb {

template <typename T>
struct PointwiseLoops {
  void (*sum)(const T* a, const T* b, T* y, int64_t n);  // y may be a or b
  // max(x, 0); NaN and -0 fail the comparison and pass through, as in torch.relu.
  void (*relu)(const T* x, T* y, int64_t n);
  // PyTorch's threshold_backward: dy where y is not <= 0 (NaN included), else 0.
  void (*relu_grad)(const T* y, const T* dy, T* dx, int64_t n);
  void (*widen)(const T* src, float* dst, int64_t n);   // exact
  void (*narrow)(const float* src, T* dst, int64_t n);  // to nearest even
  // `blocks` whole 16 x 16 blocks of Layout::kOIhw16i16o weights narrowed into kOIhw8i16o2i's
  // order (runtime/core/layout_order.h).
  void (*narrow_into_pairs)(const float* src, T* dst, int64_t blocks);
};

// SGD with momentum and weight decay on elements [0, n), as torch.optim.SGD (dampening 0), the
// gradient times grad_factor (1/scale under loss scaling; exactly 1 otherwise, then not
// multiplied, the loop of an fp32 run).
struct SgdStep {
  float lr, momentum, decay, grad_factor;
};
struct SgdLoops {
  void (*update)(const SgdStep& s, const float* g, float* buf, float* p, int64_t n);
};
// The mixed-precision update: the 16-bit gradient widened a chunk at a time, the f32 weights
// and momentum updated as SgdLoops::update does, and the weights rounded into the compute copy:
// element for element, or (into_pairs) from whole 16 x 16 blocks of Layout::kOIhw16i16o into
// the copy's kOIhw8i16o2i (`blocks` of 256 elements).
template <typename G, typename C>
struct SgdCopyLoops {
  void (*update)(const SgdStep& s, const G* g, float* buf, float* p, C* compute, int64_t n);
  void (*update_into_pairs)(const SgdStep& s, const G* g, float* buf, float* p, C* compute,
                            int64_t blocks);
};

// The loops compiled for `isa`, which the CPU must run (host_cpu_isa() or below).
template <typename T>
const PointwiseLoops<T>& pointwise_loops(CpuIsa isa);
const SgdLoops& sgd_loops(CpuIsa isa);
template <typename G, typename C>
const SgdCopyLoops<G, C>& sgd_copy_loops(CpuIsa isa);

}  // namespace dlb
