#include "suites/harness/run/image_input.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <system_error>

#include "runtime/core/error.h"
#include "workloads/data/tar_reader.h"

namespace dlb {

namespace {

ImageFolderIndex folder_index(const std::string& root) {
  std::error_code ec;
  if (!std::filesystem::is_directory(root + "/train", ec)) {
    throw InvalidArgument(fmt::format(
        "--data-path={}: no train/ folder in it (ImageNet's layout: DIR/train/<class>/*.JPEG, as "
        "dlbench make-dataset writes)",
        root));
  }
  return scan_image_folder(root + "/train");
}

// The shards as the loader takes a folder: their samples, and classes 0 to the largest label.
ImageFolderIndex shards_as_index(const std::string& pattern) {
  ShardIndex shards = index_shards(pattern);
  ImageFolderIndex index;
  index.root = pattern;
  index.samples = std::move(shards.samples);
  index.notes = std::move(shards.notes);
  for (int64_t c = 0; c < shards.classes; ++c) index.classes.push_back(std::to_string(c));
  return index;
}

}  // namespace

int64_t loader_threads_of(const RunOptions& o, const HostShare& host, int64_t compute_threads) {
  if (o.loader_threads > 0) return o.loader_threads;
  return std::max<int64_t>(1, host.cpus_per_rank() - compute_threads);
}

std::unique_ptr<ImageInput> open_image_input(const RunOptions& o, int rank, int ranks,
                                             int64_t threads, ModelConfig& mc) {
  auto in = std::make_unique<ImageInput>();
  in->index =
      o.data == DataSource::kShards ? shards_as_index(o.data_path) : folder_index(o.data_path);
  const auto classes = static_cast<int64_t>(in->index.classes.size());
  if (o.num_classes && *o.num_classes != classes) {
    throw InvalidArgument(fmt::format("--num-classes={}, but {} has {} classes", *o.num_classes,
                                      in->index.root, classes));
  }
  mc.num_classes = classes;
  if (rank == 0) {
    for (const std::string& note : in->index.notes) fmt::print(stderr, "dlbench: {}\n", note);
  }
  ImageLoaderOptions lo;
  lo.batch = mc.batch;
  lo.image_size = mc.image_size;
  lo.rank = rank;
  lo.ranks = ranks;
  lo.threads = threads;
  lo.prefetch = o.prefetch;
  lo.seed = o.seed;
  lo.fail_on_bad_image = o.fail_on_bad_images;
  lo.encoded = o.decode_on_device;
  in->threads = threads;
  in->loader = std::make_unique<ImageLoader>(in->index.samples, lo);
  return in;
}

void load_next_batch(ImageInput& in, Trainer& trainer) {
  const ImageLoader::Batch& b = in.loader->next();
  if (b.encoded.empty()) {
    trainer.load_batch(b.images.data(), b.labels.data());
    return;
  }
  const ImageNormalization norm{kImageNetMean, kImageNetStd};
  trainer.load_encoded_batch(encoded_images(b.encoded), norm, b.labels.data());
}

namespace {

class FolderEpochs final : public EpochData {
 public:
  FolderEpochs(ImageInput& in, ImageFolderIndex val, Shard shard, int64_t image_size)
      : in_(in), val_(std::move(val)), shard_(shard), size_(image_size) {}
  int64_t steps() const override { return in_.loader->steps_per_epoch(); }
  void begin_epoch() override {}  // the loader shuffles each epoch itself
  void load(Trainer& trainer, int64_t) override { load_next_batch(in_, trainer); }
  int64_t count_correct(Trainer& trainer) override {
    return count_correct_in_batches(
        trainer, test_samples(), 3 * size_ * size_, shard_,
        [this](const std::vector<int64_t>& idx, float* images, int64_t* labels) {
          eval_batch(val_.samples, idx, size_, in_.threads, images, labels);
        });
  }
  int64_t train_samples() const override { return static_cast<int64_t>(in_.index.samples.size()); }
  int64_t test_samples() const override { return static_cast<int64_t>(val_.samples.size()); }
  std::string test_name() const override { return "validation images (" + val_.root + ")"; }

 private:
  ImageInput& in_;
  ImageFolderIndex val_;
  Shard shard_;
  int64_t size_;
};

}  // namespace

std::unique_ptr<EpochData> folder_epochs(ImageInput& in, const RunOptions& o, Shard shard,
                                         int64_t image_size) {
  const std::string root = o.data_path + "/val";
  std::error_code ec;
  if (!std::filesystem::is_directory(root, ec)) {
    throw InvalidArgument(fmt::format(
        "--epochs evaluates on {}/val after each epoch, and there is none (make-dataset writes "
        "one: --val-images)",
        o.data_path));
  }
  ImageFolderIndex val = scan_image_folder(root);
  if (val.classes != in.index.classes) {
    throw InvalidArgument(fmt::format("{}: its class folders are not train/'s ({} against {})",
                                      root, val.classes.size(), in.index.classes.size()));
  }
  return std::make_unique<FolderEpochs>(in, std::move(val), shard, image_size);
}

void trace_loader(Tracer& tracer, const ImageLoader& loader) {
  if (tracer.on_device()) return;
  std::vector<std::pair<double, int64_t>> steps;  // each traced step's start, and its number
  for (const Span& s : tracer.spans()) {
    if (s.category == kStepCategory) steps.emplace_back(s.start_us, s.step);
  }
  if (steps.empty()) return;
  std::sort(steps.begin(), steps.end());
  for (const ImageLoader::Made& m : loader.made()) {
    // The last traced step begun by the time it was.
    const auto it =
        std::upper_bound(steps.begin(), steps.end(), std::pair{tracer.host_us(m.from), INT64_MAX});
    const int64_t step = it == steps.begin() ? steps.front().second : std::prev(it)->second;
    Span span{fmt::format("batch {}:{}", m.epoch, m.step), kLoaderCategory, Lane::kLoader};
    span.thread = m.worker;
    tracer.record_clipped(std::move(span), tracer.host_mark(m.from), tracer.host_mark(m.to), step);
  }
}

nlohmann::json image_input_json(const ImageInput& in, const RunOptions& o, const Trainer& trainer) {
  const LoaderStats now = in.loader->stats();
  const LoaderStats& start = in.at_timed_start;
  nlohmann::json skipped = nlohmann::json::array();
  for (size_t i = 0; i < now.skipped_files.size() && i < 10; ++i) {
    skipped.push_back(now.skipped_files[i]);
  }
  nlohmann::json out = {
      {"source", o.data == DataSource::kShards ? "shards" : "folder"},
      {"decode", o.decode_on_device ? "gpu" : "cpu"},
      {"decoder", o.decode_on_device ? trainer.image_decoder() : std::string("libjpeg-turbo")},
      {"source_images", in.index.samples.size()},
      {"classes", in.index.classes.size()},
      {"threads", in.threads},
      {"prefetch", o.prefetch},
      {"batches", now.batches - start.batches},
      {"images", now.images - start.images},
      {"waited_s", now.waited_s - start.waited_s},
      {"loader_busy_s", now.busy_s - start.busy_s},
      {"images_made", now.images_made - start.images_made},
      {"skipped", now.skipped},
      {"skipped_files", skipped}};
  if (o.decode_on_device) {
    out["decode_batches"] = trainer.decoded_batches() - in.decodes_at_timed_start;
    out["decode_device_s"] = trainer.decode_seconds() - in.decode_s_at_timed_start;
    out["decoder_device_bytes"] = trainer.image_decoder_bytes();
  }
  return out;
}

}  // namespace dlb
