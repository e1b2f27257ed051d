#include "suites/harness/sweep/suite_images.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>

#include "runtime/core/error.h"
#include "runtime/io/json_fields.h"
#include "workloads/data/make_dataset.h"

namespace dlb {
namespace {

namespace fs = std::filesystem;

bool reads_images(const nlohmann::json& config) {
  const std::string data = config.value("data", "synthetic");
  return data == "folder" || data == "shards";
}

// The suite's dataset block (its schema has checked the keys and ranges) as make-dataset's
// options; make-dataset's defaults where a key is absent.
MakeDatasetOptions dataset_options(const Suite& suite) {
  const JsonFields f(suite.dataset, suite.path + ": dataset");
  MakeDatasetOptions m;
  m.images = f.integer_or("images", m.images, 1, 10000000);
  m.val_images = f.integer_or("val_images", m.val_images, 0, 10000000);
  m.classes = f.integer_or("classes", m.classes, 1, 100000);
  m.shards = f.integer_or("shards", m.shards, 0, 100000);
  m.quality = static_cast<int>(f.integer_or("quality", m.quality, 1, 100));
  m.seed = static_cast<uint64_t>(f.integer_or("seed", 0, 0, INT64_MAX));
  if (f.has("size")) {
    std::tie(m.width, m.height) = parse_image_size(f.string("size"), suite.path + ": dataset.size");
  }
  check_make_dataset(m);
  return m;
}

}  // namespace

void check_suite_images(const SweepOptions& opt, const Suite& suite,
                        const std::vector<nlohmann::json>& points) {
  if (std::none_of(points.begin(), points.end(), reads_images)) return;
  if (!opt.data_path.empty()) {
    std::error_code ec;
    if (!fs::exists(opt.data_path, ec)) {
      throw InvalidArgument(fmt::format("--data-path={}: no such file or folder", opt.data_path));
    }
    return;
  }
  if (suite.dataset.is_null()) {
    throw InvalidArgument(fmt::format(
        "{}: its points read JPEG images (data folder or shards): give --data-path=DIR, or the "
        "suite a dataset block",
        suite.path));
  }
  dataset_options(suite);  // its size and ranges, as make-dataset checks them
}

std::string prepare_suite_images(const SweepOptions& opt, const Suite& suite,
                                 const std::vector<nlohmann::json>& points,
                                 const std::string& out) {
  check_suite_images(opt, suite, points);
  if (std::none_of(points.begin(), points.end(), reads_images)) return "";
  if (!opt.data_path.empty()) return opt.data_path;
  const MakeDatasetOptions m = dataset_options(suite);
  const std::string dir = out + "/dataset";
  std::error_code ec;
  if (fs::is_directory(dir + "/train", ec)) {
    fmt::print("images: {} (made before)\n", dir);
    return dir;
  }
  const auto began = std::chrono::steady_clock::now();
  const DatasetFiles files = write_dataset_atomically(dir, m, "the suite's dataset");
  fmt::print(
      "images: {} training and {} validation JPEGs of {} classes (about {}x{}), {} shard(s), "
      "made in {} in {:.1f} s\n",
      files.train, files.val, m.classes, m.width, m.height, files.shards, dir,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
  std::fflush(stdout);
  return dir;
}

std::string data_path_of(DataSource data, const std::string& images) {
  if (data == DataSource::kFolder) return images;
  if (data != DataSource::kShards) return "";
  std::error_code ec;
  return fs::is_directory(images + "/shards", ec) ? images + "/shards" : images;
}

}  // namespace dlb
