#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <mutex>

#include "runtime/core/error.h"
#include "workloads/models/model.h"

namespace dlb {

const std::vector<ModelInfo>& model_registry() {
  static const std::vector<ModelInfo> models = {
      {"alexnet", "torchvision AlexNet", 3, 224, 1000, build_alexnet},
      {"vgg16", "torchvision VGG-16 (no batch norm)", 3, 224, 1000, build_vgg16},
      {"resnet18", "torchvision ResNet-18", 3, 224, 1000, build_resnet18},
      {"resnet50", "torchvision ResNet-50 v1.5", 3, 224, 1000, build_resnet50},
      {"resnet101", "torchvision ResNet-101 v1.5", 3, 224, 1000, build_resnet101},
      {"digits-cnn", "small CNN for 8x8 digits", 1, 8, 10, build_digits_cnn},
  };
  return models;
}

const ModelInfo& find_model(const std::string& name) {
  std::vector<std::string> names;
  for (const ModelInfo& m : model_registry()) {
    if (m.name == name) return m;
    names.push_back(m.name);
  }
  throw InvalidArgument(fmt::format("unknown model '{}' (known: {})", name,
                                    fmt::format("{}", fmt::join(names, ", "))));
}

int64_t min_image_size(const ModelInfo& model) {
  static std::mutex mu;
  static std::map<std::string, int64_t> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(model.name);
  if (it != cache.end()) return it->second;
  for (int64_t s = 1; s <= 4096; ++s) {
    try {
      model.build(ModelConfig{1, s, model.default_classes, std::nullopt});
      return cache[model.name] = s;
    } catch (const InvalidArgument&) {
    }
  }
  throw InvalidArgument(fmt::format("model {} accepts no image size up to 4096", model.name));
}

void check_image_size(const ModelInfo& model, int64_t image_size) {
  const int64_t smallest = min_image_size(model);
  if (image_size < smallest) {
    throw InvalidArgument(
        fmt::format("image size {} is too small for {}: the smallest it accepts "
                    "is {}x{}",
                    image_size, model.name, smallest, smallest));
  }
}

Graph build_model(const std::string& name, ModelConfig c) {
  const ModelInfo& m = find_model(name);
  if (c.batch < 1) throw InvalidArgument(fmt::format("batch must be at least 1 (got {})", c.batch));
  if (c.num_classes == 0) c.num_classes = m.default_classes;
  if (c.num_classes < 1) throw InvalidArgument("the number of classes must be positive");
  check_image_size(m, c.image_size);
  return m.build(c);
}

}  // namespace dlb
