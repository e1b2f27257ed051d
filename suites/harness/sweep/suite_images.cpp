#include "suites/harness/sweep/suite_images.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>

#include "runtime/core/error.h"
#include "runtime/io/json_fields.h"
#include "runtime/io/json_text.h"
#include "runtime/io/output_file.h"
#include "runtime/io/text_file.h"
#include "workloads/data/make_dataset.h"

namespace dlb {
namespace {

namespace fs = std::filesystem;

bool reads_images(const nlohmann::json& config) {
  const std::string data = config.value("data", "synthetic");
  return data == "folder" || data == "shards";
}

bool reads_shards(const nlohmann::json& config) { return config.value("data", "") == "shards"; }

// What a made dataset was made from, kept beside it (DIR/dataset.json): a later run with other
// options must not take it for theirs.
nlohmann::json made_from(const MakeDatasetOptions& m) {
  return {{"images", m.images},   {"val_images", m.val_images},
          {"classes", m.classes}, {"width", m.width},
          {"height", m.height},   {"shards", m.shards},
          {"quality", m.quality}, {"seed", m.seed}};
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
  m.seed = static_cast<uint64_t>(f.integer_or("seed", static_cast<int64_t>(m.seed), 0, INT64_MAX));
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
    if (escape_non_utf8(opt.data_path) != opt.data_path) {
      throw InvalidArgument(fmt::format(
          "--data-path={}: not valid UTF-8 (the points' files and records carry it as JSON text)",
          escape_non_utf8(opt.data_path)));
    }
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
  const MakeDatasetOptions m = dataset_options(suite);  // as make-dataset checks them
  if (m.shards == 0 && std::any_of(points.begin(), points.end(), reads_shards)) {
    throw InvalidArgument(fmt::format(
        "{}: points of data shards, and a dataset block that makes no shards (shards: 0)",
        suite.path));
  }
}

std::string prepare_suite_images(const SweepOptions& opt, const Suite& suite,
                                 const std::vector<nlohmann::json>& points,
                                 const std::string& out) {
  if (std::none_of(points.begin(), points.end(), reads_images)) return "";
  if (!opt.data_path.empty()) return opt.data_path;
  const MakeDatasetOptions m = dataset_options(suite);
  const std::string dir = out + "/dataset";
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    const std::string kept = dir + "/dataset.json";
    if (!fs::is_regular_file(kept, ec) ||
        parse_json(read_text_file(kept, "dataset options"), kept) != made_from(m)) {
      throw InvalidArgument(fmt::format(
          "{}: made from other options than the suite's dataset block (or not by a sweep); "
          "remove it, or give another --out",
          dir));
    }
    fmt::print("images: {} (made before)\n", dir);
    return dir;
  }
  const auto began = std::chrono::steady_clock::now();
  const DatasetFiles files = write_dataset_atomically(dir, m, "the suite's dataset");
  write_file_atomically(dir + "/dataset.json", made_from(m).dump(2) + "\n");
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
