// A fixed batch from a safetensors file (`dlbench run --batch-file`): exactly two tensors,
// "images" f32 [N, C, H, H] and "labels" int64 [N]. Every rank of a data-parallel run takes its
// equal slice: rank r the r-th N / ranks samples.
#pragma once
#include <string>

#include "runtime/core/host_tensor.h"
#include "workloads/data/dataset.h"

namespace dlb {

struct BatchFileShape {
  int64_t channels = 0;     // the model's input channels
  int64_t num_classes = 0;  // labels must lie in [0, num_classes)
  int rank = 0, ranks = 1;
};

// This rank's slice of the batch in `tensors` (read from `source`). InvalidArgument, naming the
// source, for a missing or extra tensor, a wrong dtype or shape, an empty batch or image, a batch
// that does not split over the ranks, a non-finite pixel or a label out of range.
Dataset batch_from_tensors(const StateDict& tensors, const std::string& source,
                           const BatchFileShape& want);
// batch_from_tensors over load_safetensors(path).
Dataset load_batch_file(const std::string& path, const BatchFileShape& want);

}  // namespace dlb
