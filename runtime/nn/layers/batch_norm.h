// torch.nn.BatchNorm2d (and 1d on [N, C]): eps 1e-5, momentum 0.1, affine, running statistics.
#pragma once
#include "runtime/nn/layer.h"

namespace dlb {

class BatchNorm final : public Layer {
 public:
  explicit BatchNorm(int64_t channels, float eps = 1e-5f, float momentum = 0.1f);
  std::string_view kind() const override { return "batch_norm"; }
  Shape output_shape(const std::vector<Shape>& in) const override;
  void declare(LayerDeclaration& d) const override;
  void require(const Backend& backend, const PrecisionPolicy& policy) const override;
  // What the backend needs for its training pass, made now (Backend::plan_batch_norm).
  void plan(const LayerPlanning& p) override;
  void setup(LayerSetup& s) override;
  void forward(const LayerContext& ctx, const LayerTensors& own,
               const std::vector<const Tensor*>& x, Tensor& y) override;
  void backward_data(const LayerContext& ctx, const LayerTensors& own,
                     const std::vector<const Tensor*>& x, const Tensor& y, const Tensor& dy,
                     const std::vector<Tensor*>& dx) override;
  // Fused with the ReLU after it, backward also reads the output (the ReLU's mask).
  PassReads backward_data_reads() const override { return {true, relu_}; }
  bool can_fuse_relu(const BackendTraits& traits) const override {
    return traits.fuses_batch_norm_relu;
  }
  void fuse_relu() override { relu_ = true; }
  bool fused_relu() const { return relu_; }
  bool fused_backward() const override { return true; }
  int64_t num_params() const override { return 2 * channels_; }
  float eps() const { return eps_; }
  double forward_flops(const std::vector<Shape>& in) const override;
  std::vector<OpInstance> op_instances(const std::vector<Shape>& in) const override;

 private:
  int64_t channels_;
  float eps_, momentum_;
  bool relu_ = false;
};

}  // namespace dlb
