// torch.nn.Conv2d: weight [out, in/groups, kh, kw] and optional bias, through a backend plan.
#pragma once
#include <memory>

#include "runtime/nn/init.h"
#include "runtime/nn/layer.h"

namespace dlb {

struct Conv2dOptions {
  int64_t in_channels = 0, out_channels = 0, kernel = 1, stride = 1, padding = 0, groups = 1;
  bool bias = true;
  Init init = Init::kTorchDefault;
};

class Conv2d final : public Layer {
 public:
  explicit Conv2d(const Conv2dOptions& o);
  std::string_view kind() const override { return "conv2d"; }
  Shape output_shape(const std::vector<Shape>& in) const override;
  void declare(LayerDeclaration& d) const override;
  void require(const Backend& backend, const PrecisionPolicy& policy) const override;
  void plan(const LayerPlanning& p) override;
  void setup(LayerSetup& s) override;
  void forward(const LayerContext& ctx, const LayerTensors& own,
               const std::vector<const Tensor*>& x, Tensor& y) override;
  void backward_data(const LayerContext& ctx, const LayerTensors& own,
                     const std::vector<const Tensor*>& x, const Tensor& y, const Tensor& dy,
                     const std::vector<Tensor*>& dx) override;
  void backward_weights(const LayerContext& ctx, const LayerTensors& own,
                        const std::vector<const Tensor*>& x, const Tensor& y,
                        const Tensor& dy) override;
  PassReads backward_weights_reads() const override { return {true, false}; }
  // With its ReLU (fuse_relu), one backward pass: dy masked where the output is not positive,
  // then the data, weight and bias gradients from that; it reads the input and the output.
  PassReads backward_data_reads() const override { return {relu_, relu_}; }
  bool fused_backward() const override { return relu_; }
  bool fused_backward_writes_unread_gradient() const override { return false; }
  bool can_fuse_relu(const BackendTraits& traits) const override { return traits.fuses_conv_relu; }
  void fuse_relu() override { relu_ = true; }
  bool fused_relu() const { return relu_; }
  int64_t num_params() const override {
    return o_.out_channels * (o_.in_channels / o_.groups) * o_.kernel * o_.kernel +
           (o_.bias ? o_.out_channels : 0);
  }
  double forward_flops(const std::vector<Shape>& in) const override;
  bool is_matmul_layer() const override { return true; }
  std::vector<OpInstance> op_instances(const std::vector<Shape>& in) const override;
  std::vector<PassAlgorithm> algorithms() const override {
    return plan_ ? plan_->algorithms() : std::vector<PassAlgorithm>{};
  }

  ConvDesc describe(const Shape& in, const OpTypes& types = {}) const;
  // How the master weight and what is stored with it (its gradient, its momentum) are stored:
  // Layout::kOIhw16i16o where the backend blocks conv weights (`blocks`:
  // Backend::blocks_conv_weights) and the channels fill oneDNN's blocks of 16 (ungrouped);
  // torchvision's KCRS elsewhere. Its compute copy takes the backend's
  // conv_weight_copy_layout of this (LayerDeclaration::compute_copy), or channels-last.
  Layout weight_layout(bool blocks) const;
  const ConvPlan& plan() const { return *plan_; }

 private:
  // The three gradients from dy (masked already, with the ReLU).
  void gradients(const LayerContext& ctx, const LayerTensors& own, const Tensor& x,
                 const Tensor& dy, Tensor* dx);
  Conv2dOptions o_;
  std::unique_ptr<ConvPlan> plan_;
  bool relu_ = false;
};

}  // namespace dlb
