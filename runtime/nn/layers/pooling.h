// torch.nn.MaxPool2d, AvgPool2d and AdaptiveAvgPool2d.
#pragma once
#include "runtime/nn/layer.h"

namespace dlb {

class Pool2d final : public Layer {
 public:
  // kernel, stride and padding as torch's (floor mode).
  Pool2d(PoolMode mode, int64_t kernel, int64_t stride, int64_t padding = 0);
  std::string_view kind() const override;
  Shape output_shape(const std::vector<Shape>& in) const override;
  void declare(LayerDeclaration& d) const override;
  void require(const Backend& backend, const PrecisionPolicy& policy) const override;
  void forward(const LayerContext& ctx, const LayerTensors& own,
               const std::vector<const Tensor*>& x, Tensor& y) override;
  void backward_data(const LayerContext& ctx, const LayerTensors& own,
                     const std::vector<const Tensor*>& x, const Tensor& y, const Tensor& dy,
                     const std::vector<Tensor*>& dx) override;
  // x and y: the search of each window, where no argmax is kept (with one, backward reads it and
  // dy only; the planner keeps x and y anyway, whose readers need them in torchvision's models).
  PassReads backward_data_reads() const override { return {true, true}; }
  double forward_flops(const std::vector<Shape>& in) const override;
  std::vector<OpInstance> op_instances(const std::vector<Shape>& in) const override;

 private:
  PoolDesc desc_;
};

class AdaptiveAvgPool2d final : public Layer {
 public:
  AdaptiveAvgPool2d(int64_t out_h, int64_t out_w);
  std::string_view kind() const override { return "adaptive_avg_pool2d"; }
  Shape output_shape(const std::vector<Shape>& in) const override;
  void require(const Backend& backend, const PrecisionPolicy& policy) const override;
  void forward(const LayerContext& ctx, const LayerTensors& own,
               const std::vector<const Tensor*>& x, Tensor& y) override;
  void backward_data(const LayerContext& ctx, const LayerTensors& own,
                     const std::vector<const Tensor*>& x, const Tensor& y, const Tensor& dy,
                     const std::vector<Tensor*>& dx) override;
  double forward_flops(const std::vector<Shape>& in) const override;
  std::vector<OpInstance> op_instances(const std::vector<Shape>& in) const override;

 private:
  int64_t out_h_, out_w_;
};

}  // namespace dlb
