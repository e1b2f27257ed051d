// The op checker's grid: every distinct op instance the reference models run at the chosen image
// sizes and batches (each layer's declared instances, the loss on the logits, and the update of
// each parameter), deduplicated by their text, each with where it came from.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/check/op_instance.h"

namespace dlb {

struct GridInstance {
  OpInstance op;
  std::vector<std::string> origins;  // "resnet18 96px b4: layer2.0.conv1"
};

struct GridRequest {
  std::vector<std::string> models;  // every reference model when empty
  std::vector<int64_t> sizes;       // kDefaultCheckSizes when empty
  std::vector<int64_t> batches;     // kDefaultCheckBatches when empty
  std::vector<OpKind> ops;          // every kind when empty
};

inline constexpr int64_t kDefaultCheckSizes[] = {32, 64, 96, 224};
inline constexpr int64_t kDefaultCheckBatches[] = {1, 2, 4};

struct Grid {
  std::vector<GridInstance> instances;  // by kind, then text
  std::vector<std::string> notes;       // sizes a model was skipped at
};

// With the default sizes, a model that cannot take one is skipped with a note, and one made for
// smaller images than the grid's smallest (digits-cnn, 8 px) runs at its own size; sizes given
// explicitly apply to every model, and one too small is an InvalidArgument naming the smallest.
Grid enumerate_grid(const GridRequest& request);

}  // namespace dlb
