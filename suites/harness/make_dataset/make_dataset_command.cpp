#include "suites/harness/make_dataset/make_dataset_command.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <tuple>

namespace dlb {

int make_dataset_command(const MakeDatasetCommandOptions& o) {
  MakeDatasetOptions data = o.data;
  std::tie(data.width, data.height) = parse_image_size(o.size);
  const auto began = std::chrono::steady_clock::now();
  const DatasetFiles files = write_dataset_atomically(o.out, data);
  const std::string out = std::filesystem::absolute(o.out).lexically_normal().string();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  fmt::print(
      "make-dataset: {} training images ({} classes, about {}x{}, JPEG quality {}) in {}/train, "
      "{} in {}/val, {} shard(s) in {}/shards; {:.1f} MB of JPEG in {:.1f} s\n",
      files.train, data.classes, data.width, data.height, data.quality, out, files.val, out,
      files.shards, out, static_cast<double>(files.bytes) / 1e6, s);
  return 0;
}

}  // namespace dlb
