// The reference models: torchvision-exact architectures (so parameter names, shapes and counts
// match torchvision's), built as graphs for one batch and image size.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/nn/graph.h"

namespace dlb {

struct ModelConfig {
  int64_t batch = 1;
  int64_t image_size = 224;
  int64_t num_classes = 0;       // 0: the model's default (1000, or 10 for digits-cnn)
  std::optional<float> dropout;  // overrides the model's dropout probability
};

struct ModelInfo {
  std::string name;
  std::string description;
  int64_t in_channels;
  int64_t default_image_size;
  int64_t default_classes;
  std::function<Graph(const ModelConfig&)> build;  // config already resolved and checked
};

const std::vector<ModelInfo>& model_registry();
// Throws InvalidArgument naming the known models.
const ModelInfo& find_model(const std::string& name);
// Smallest square image the model accepts.
int64_t min_image_size(const ModelInfo& model);
// InvalidArgument naming the smallest size when `image_size` is below it.
void check_image_size(const ModelInfo& model, int64_t image_size);
// Validates the config (batch >= 1, image large enough: the message names the smallest size)
// and builds the graph, not yet set up.
Graph build_model(const std::string& name, ModelConfig config);

// Builders, one file each.
Graph build_alexnet(const ModelConfig& c);
Graph build_vgg16(const ModelConfig& c);
Graph build_resnet18(const ModelConfig& c);
Graph build_resnet50(const ModelConfig& c);
Graph build_resnet101(const ModelConfig& c);
Graph build_digits_cnn(const ModelConfig& c);

}  // namespace dlb
