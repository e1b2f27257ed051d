// torch.nn.Linear: y = x W^T + b with weight [out, in].
#pragma once
#include "runtime/nn/init.h"
#include "runtime/nn/layer.h"

namespace dlb {

class Linear final : public Layer {
 public:
  Linear(int64_t in_features, int64_t out_features, Init init = Init::kTorchDefault);
  std::string_view kind() const override { return "linear"; }
  Shape output_shape(const std::vector<Shape>& in) const override;
  void declare(LayerDeclaration& d) const override;
  void require(const Backend& backend, const PrecisionPolicy& policy) const override;
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
  int64_t num_params() const override { return out_ * in_ + out_; }
  double forward_flops(const std::vector<Shape>& in) const override;
  bool is_matmul_layer() const override { return true; }
  std::vector<OpInstance> op_instances(const std::vector<Shape>& in) const override;

 private:
  int64_t in_, out_;
  Init init_;
  Precision math_ = Precision::kFp32;  // the run's, from setup
};

}  // namespace dlb
