// Parameter initialisers, following the schemes torchvision's model constructors apply.
#pragma once
#include "runtime/backend/backend.h"
#include "runtime/core/rng.h"

namespace dlb {

enum class Init {
  kTorchDefault,  // nn.Conv2d/nn.Linear default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), bias too
  kKaimingNormalFanOut,  // N(0, sqrt(2/fan_out)), bias 0 (ResNet and VGG convolutions)
  kNormal001,            // N(0, 0.01), bias 0 (VGG linear layers)
};

// Fills weight [out, in, kh, kw] or [out, in] and (if defined) bias [out].
void init_weight_and_bias(Backend& backend, Init init, Rng& rng, Tensor& weight, Tensor& bias);

}  // namespace dlb
