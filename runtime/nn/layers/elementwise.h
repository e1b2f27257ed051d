// Parameter-free layers: ReLU, Dropout, the residual Add, and Flatten.
#pragma once
#include "runtime/nn/layer.h"

namespace dlb {

class Relu final : public Layer {
 public:
  std::string_view kind() const override { return "relu"; }
  Shape output_shape(const std::vector<Shape>& in) const override { return in.at(0); }
  void require(const Backend& backend, const PrecisionPolicy& policy) const override;
  PassReads backward_data_reads() const override { return {false, true}; }
  bool is_relu() const override { return true; }
  std::vector<OpInstance> op_instances(const std::vector<Shape>& in) const override;
  void forward(const LayerContext& ctx, const LayerTensors& own,
               const std::vector<const Tensor*>& x, Tensor& y) override;
  void backward_data(const LayerContext& ctx, const LayerTensors& own,
                     const std::vector<const Tensor*>& x, const Tensor& y, const Tensor& dy,
                     const std::vector<Tensor*>& dx) override;
  double forward_flops(const std::vector<Shape>& in) const override;
};

class Dropout final : public Layer {
 public:
  explicit Dropout(float p);
  std::string_view kind() const override { return "dropout"; }
  Shape output_shape(const std::vector<Shape>& in) const override { return in.at(0); }
  void declare(LayerDeclaration& d) const override;
  void require(const Backend& backend, const PrecisionPolicy& policy) const override;
  void setup(LayerSetup& s) override;
  void forward(const LayerContext& ctx, const LayerTensors& own,
               const std::vector<const Tensor*>& x, Tensor& y) override;
  void backward_data(const LayerContext& ctx, const LayerTensors& own,
                     const std::vector<const Tensor*>& x, const Tensor& y, const Tensor& dy,
                     const std::vector<Tensor*>& dx) override;
  double forward_flops(const std::vector<Shape>& in) const override;
  float p() const { return p_; }
  std::vector<OpInstance> op_instances(const std::vector<Shape>& in) const override;

 private:
  float p_;
  // This layer's own random stream, added to the step's seed: two dropout layers of one step
  // (alexnet's, vgg16's) must not draw one mask for the elements at the same place.
  uint64_t stream_ = 0;
  bool active_ = false;  // whether the last forward applied a mask
};

class Add final : public Layer {
 public:
  std::string_view kind() const override { return "add"; }
  std::vector<OpInstance> op_instances(const std::vector<Shape>& in) const override;
  Shape output_shape(const std::vector<Shape>& in) const override;
  void require(const Backend& backend, const PrecisionPolicy& policy) const override;
  bool passes_gradient_through() const override { return true; }
  void forward(const LayerContext& ctx, const LayerTensors& own,
               const std::vector<const Tensor*>& x, Tensor& y) override;
  void backward_data(const LayerContext& ctx, const LayerTensors& own,
                     const std::vector<const Tensor*>& x, const Tensor& y, const Tensor& dy,
                     const std::vector<Tensor*>& dx) override;
  double forward_flops(const std::vector<Shape>& in) const override;
};

class Flatten final : public Layer {
 public:
  std::string_view kind() const override { return "flatten"; }
  Shape output_shape(const std::vector<Shape>& in) const override;
  bool is_view() const override { return true; }
  void forward(const LayerContext& ctx, const LayerTensors& own,
               const std::vector<const Tensor*>& x, Tensor& y) override;
  void backward_data(const LayerContext& ctx, const LayerTensors& own,
                     const std::vector<const Tensor*>& x, const Tensor& y, const Tensor& dy,
                     const std::vector<Tensor*>& dx) override;
  double forward_flops(const std::vector<Shape>&) const override { return 0; }
};

}  // namespace dlb
