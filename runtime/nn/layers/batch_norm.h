// torch.nn.BatchNorm2d (and 1d on [N, C]): eps 1e-5, momentum 0.1, affine, running statistics.
#pragma once
#include "runtime/nn/layer.h"

namespace dlb {

class BatchNorm final : public Layer {
 public:
  explicit BatchNorm(int64_t channels, float eps = 1e-5f, float momentum = 0.1f);
  std::string_view kind() const override { return "batch_norm"; }
  Shape output_shape(const std::vector<Shape>& in) const override;
  void setup(Backend& backend, const std::vector<Shape>& in, Rng& rng) override;
  void forward(const LayerContext& ctx, const std::vector<const Tensor*>& x, Tensor& y) override;
  void backward_data(const LayerContext& ctx, const std::vector<const Tensor*>& x, const Tensor& y,
                     const Tensor& dy, const std::vector<Tensor*>& dx) override;
  void backward_weights(const LayerContext& ctx, const std::vector<const Tensor*>& x,
                        const Tensor& y, const Tensor& dy) override;
  std::vector<Param*> params() override { return {&weight_, &bias_}; }
  void save_state(Backend& backend, const std::string& prefix, StateDict& out) override;
  void load_state(Backend& backend, const std::string& prefix, const StateDict& in,
                  std::vector<std::string>& used) override;
  int64_t num_params() const override { return 2 * channels_; }
  double forward_flops(const std::vector<Shape>& in) const override;

 private:
  // One backend call computes dx, dgamma and dbeta together. The graph calls backward_data
  // first; backward_weights only computes when no data gradient was asked for.
  void compute_gradients(const LayerContext& ctx, const Tensor& x, const Tensor& dy, Tensor& dx);

  int64_t channels_;
  float eps_, momentum_;
  Param weight_{"weight", {}, {}};
  Param bias_{"bias", {}, {}};
  Tensor running_mean_, running_var_, save_mean_, save_invstd_;
  Tensor spare_dx_;  // only for a batch norm whose input needs no gradient
  int64_t num_batches_tracked_ = 0;
  bool grads_ready_ = false;
};

}  // namespace dlb
