#include "workloads/data/batch_file.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "runtime/core/error.h"
#include "runtime/io/safetensors.h"

namespace dlb {

namespace {

// 'images' f32 [N, C, H, H] of the model's channels, N over the ranks evenly; 'labels' int64 [N].
void check_batch_shapes(const HostTensor& i, const HostTensor& l, const std::string& source,
                        const BatchFileShape& want) {
  if (i.dtype != DType::kF32 || i.shape.rank() != 4 || i.shape[2] != i.shape[3]) {
    throw InvalidArgument(fmt::format("{}: 'images' must be f32 [N, C, H, H], found {} {}", source,
                                      dtype_name(i.dtype), i.shape.str()));
  }
  const int64_t n = i.shape[0], side = i.shape[2];
  if (n < 1 || side < 1) {
    throw InvalidArgument(fmt::format("{}: 'images' {} holds no image, or images of no pixel",
                                      source, i.shape.str()));
  }
  if (l.dtype != DType::kI64 || l.shape.rank() != 1 || l.shape[0] != n) {
    throw InvalidArgument(fmt::format("{}: 'labels' must be int64 [{}], found {} {}", source, n,
                                      dtype_name(l.dtype), l.shape.str()));
  }
  if (i.shape[1] != want.channels) {
    throw InvalidArgument(fmt::format("{}: images have {} channels; the model takes {}", source,
                                      i.shape[1], want.channels));
  }
  if (n % want.ranks != 0) {
    throw InvalidArgument(
        fmt::format("{}: {} images do not split evenly over {} ranks", source, n, want.ranks));
  }
}

}  // namespace

Dataset batch_from_tensors(const StateDict& tensors, const std::string& source,
                           const BatchFileShape& want) {
  const auto img = tensors.find("images");
  const auto lab = tensors.find("labels");
  if (img == tensors.end() || lab == tensors.end() || tensors.size() != 2) {
    std::vector<std::string> names;
    for (const auto& [name, _] : tensors) names.push_back("'" + name + "'");
    throw InvalidArgument(
        fmt::format("{}: a batch file holds exactly the tensors 'images' and 'labels' (found {})",
                    source, names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
  }
  const HostTensor& i = img->second;
  const HostTensor& l = lab->second;
  check_batch_shapes(i, l, source, want);
  const int64_t n = i.shape[0], side = i.shape[2];
  // The parser checked that the bytes match the shapes; the values are read here.
  const int64_t per_rank = n / want.ranks;
  const int64_t image_elems = i.shape.numel() / n;
  Dataset d{i.shape[1], side, side, want.num_classes, {}, {}};
  d.images.resize(static_cast<size_t>(per_rank * image_elems));
  std::memcpy(d.images.data(), i.bytes.data() + want.rank * per_rank * image_elems * 4,
              d.images.size() * 4);
  d.labels.resize(static_cast<size_t>(per_rank));
  std::memcpy(d.labels.data(), l.bytes.data() + want.rank * per_rank * 8, d.labels.size() * 8);
  for (size_t k = 0; k < d.images.size(); ++k) {
    if (!std::isfinite(d.images[k])) {
      const int64_t sample = want.rank * per_rank + static_cast<int64_t>(k) / image_elems;
      throw InvalidArgument(
          fmt::format("{}: image {} holds a non-finite value ({})", source, sample, d.images[k]));
    }
  }
  for (size_t k = 0; k < d.labels.size(); ++k) {
    if (d.labels[k] < 0 || d.labels[k] >= want.num_classes) {
      throw InvalidArgument(
          fmt::format("{}: label {} is {}, outside [0, {}) for the model's {} "
                      "classes",
                      source, want.rank * per_rank + static_cast<int64_t>(k), d.labels[k],
                      want.num_classes, want.num_classes));
    }
  }
  return d;
}

Dataset load_batch_file(const std::string& path, const BatchFileShape& want) {
  return batch_from_tensors(load_safetensors(path), path, want);
}

}  // namespace dlb
