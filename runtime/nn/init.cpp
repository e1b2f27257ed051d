#include "runtime/nn/init.h"

#include <cmath>
#include <vector>

#include "runtime/core/layout_order.h"

namespace dlb {

void init_weight_and_bias(Backend& backend, Init init, Rng& rng, Tensor& weight, Tensor& bias) {
  const int64_t out = weight.dim(0);
  const int64_t fan_in = weight.numel() / out;
  const int64_t fan_out = weight.numel() / weight.dim(1);
  std::vector<float> w(weight.numel());
  std::vector<float> b(bias.defined() ? bias.numel() : 0, 0.f);
  switch (init) {
    case Init::kTorchDefault: {
      const float bound = 1.f / std::sqrt(static_cast<float>(fan_in));
      for (float& v : w) v = rng.uniform(-bound, bound);
      for (float& v : b) v = rng.uniform(-bound, bound);
      break;
    }
    case Init::kKaimingNormalFanOut: {
      const float stddev = std::sqrt(2.f / static_cast<float>(fan_out));
      for (float& v : w) v = rng.normal(0.f, stddev);
      break;
    }
    case Init::kNormal001:
      for (float& v : w) v = rng.normal(0.f, 0.01f);
      break;
  }
  // Drawn in torchvision's order; stored as the weight's layout says.
  std::vector<float> stored(w.size());
  relayout_floats(weight.shape(), Layout::kNCHW, w.data(), weight.layout(), stored.data());
  backend.copy_from_host(stored.data(), weight);
  if (bias.defined()) backend.copy_from_host(b.data(), bias);
}

}  // namespace dlb
