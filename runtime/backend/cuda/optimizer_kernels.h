// The optimizer's kernels' math (kernel_layout.h says how these headers work): SGD with momentum
// over f32 master weights, and loss scaling's check and update. Host-compilable.
#pragma once
#include <cmath>
#include <cstdint>

#include "runtime/backend/backend.h"
#include "runtime/backend/cuda/kernel_layout.h"
#include "runtime/backend/cuda/stored.h"
#include "runtime/core/host_device.h"

namespace dlb::cuda {

// torch.optim.SGD with momentum and weight decay (dampening 0), over one element of the flat
// parameter buffer: the master weights and momentum are f32, the gradient G (f32, or 16-bit in a
// mixed-precision run). nvcc may contract the multiply-adds into FMAs: on a GPU the result can
// differ from the CPU's by a rounding per operation.
//   - With `scaler` (fp16's loss-scale state): the gradient times 1/scale (the reciprocal in
//     double, rounded to float once, as GradScaler), or nothing at all when the step's found-inf
//     slot is set: the step is skipped.
//   - With `compute`: the updated weight is also stored in the compute precision, the 16-bit
//     copy that forward and backward read. The copy costs no pass of its own.
//   - With `to` (a conv weight in a channels-last run): the gradient and the copy are stored
//     channels-last, the master weights and momentum in torchvision's layout.
template <typename G>
struct SgdUpdate {
  static constexpr const char* kName = "sgd update";
  SgdConfig cfg;
  const G* grad;
  const float* scaler;  // null: no loss scaling
  float* momentum;
  float* param;
  G* compute;  // null: no compute copy
  ToChannelsLast to;
  DLB_HD void operator()(int64_t i) const {
    const int64_t j = to(i);
    float g = load(grad[j]);
    if (scaler) {
      if (scaler[kFoundInfSlot] != 0.f) return;
      g *= static_cast<float>(1.0 / static_cast<double>(scaler[kScaleSlot]));
    }
    const float d = g + cfg.weight_decay * param[i];
    momentum[i] = cfg.momentum * momentum[i] + d;
    param[i] -= cfg.lr * momentum[i];
    if (compute) compute[j] = stored<G>(param[i]);
  }
};

// One parameter of a multi-tensor update: SgdUpdate's tensors, and where its elements start in
// the launch's index space.
template <typename G>
struct SgdSlot {
  const G* grad;
  float* momentum;
  float* param;
  G* compute;  // null: no compute copy
  ToChannelsLast to;
  int64_t begin;
};

// Parameters one launch updates: resnet50 has 161, vgg16 32. The table is passed by value, as a
// kernel argument (as PyTorch's multi_tensor_apply passes its chunk lists), so a captured step
// replays it with no copy and no memory of its own: 256 slots of 56 bytes fit the 32,764 bytes a
// kernel's arguments may take (CUDA 12.1 and later, Volta and later).
constexpr int kSgdTableSlots = 256;

// SgdUpdate over many parameters in one launch: index i is element i - begin of the slot whose
// elements hold it (the last slot whose begin is at most i: an empty slot is skipped). The same
// arithmetic, so the same bits, as one SgdUpdate per parameter.
template <typename G>
struct MultiSgdUpdate {
  static constexpr const char* kName = "sgd update (multi-tensor)";
  SgdConfig cfg;
  const float* scaler;  // null: no loss scaling
  int count;            // slots in use
  SgdSlot<G> slots[kSgdTableSlots];
  DLB_HD void operator()(int64_t i) const {
    int lo = 0, hi = count - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (slots[mid].begin <= i) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    const SgdSlot<G>& s = slots[lo];
    SgdUpdate<G>{cfg, s.grad, scaler, s.momentum, s.param, s.compute, s.to}(i - s.begin);
  }
};
static_assert(sizeof(MultiSgdUpdate<float>) + sizeof(int64_t) <= 32764,
              "a multi-tensor update's table must fit a kernel's arguments");

// Loss scaling's check (GradScaler's found_inf), on the stored bits: sets the found-inf slot when
// gradient i is inf or NaN; never clears it. Index 0 also counts a scale whose reciprocal is
// infinite, as GradScaler does (0 x inf is NaN there). Every writer writes the same 1.
template <typename G>
struct FindNonFinite {
  static constexpr const char* kName = "loss scale: find inf/nan";
  const G* grads;
  float* scaler;
  DLB_HD void operator()(int64_t i) const {
    bool found = non_finite(grads[i]);
    if (i == 0) {
      found =
          found || non_finite(static_cast<float>(1.0 / static_cast<double>(scaler[kScaleSlot])));
    }
    if (found) scaler[kFoundInfSlot] = 1.f;
  }
};

// GradScaler.update on the device, one index (a single thread): backend.h's rule.
struct UpdateLossScale {
  static constexpr const char* kName = "loss scale: update";
  LossScaleConfig cfg;
  float* s;
  DLB_HD void operator()(int64_t) const { update_loss_scale_state(cfg, s); }
};

}  // namespace dlb::cuda
