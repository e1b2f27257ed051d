// The input pipeline's folder and loader (workloads/data/image_folder.h, image_loader.h) on a
// small generated set: ImageFolder's classes and labels, every sample once per epoch across the
// ranks, the same bytes at 1 and 3 threads, and bad files skipped, counted and named once, or
// the run's end.
#include "workloads/data/image_loader.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "runtime/core/error.h"
#include "suites/harness/core/source_dir.h"
#include "workloads/data/make_dataset.h"

namespace dlb {
namespace {

class ImageLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dlb-loader-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    MakeDatasetOptions o;
    o.images = 24;
    o.val_images = 0;
    o.classes = 3;
    o.width = 48;
    o.height = 40;
    o.shards = 0;
    write_dataset(dir_.string(), o);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(ImageLoaderTest, TheFolderIsImageFoldersClassesAndLabels) {
  std::filesystem::create_directories(dir_ / "train" / "class_003");  // an empty class
  std::ofstream(dir_ / "train" / "class_001" / "notes.txt") << "not an image";
  std::filesystem::create_directory_symlink(dir_ / "train", dir_ / "train" / "class_002" / "loop");
  const ImageFolderIndex index = scan_image_folder((dir_ / "train").string());
  ASSERT_EQ(index.classes,
            (std::vector<std::string>{"class_000", "class_001", "class_002", "class_003"}));
  // class_002/loop leads back to train/: class_000 and class_001 once more (16 images), and
  // class_002, on its own path, is a loop noted and not entered again.
  ASSERT_EQ(index.samples.size(), 24u + 16u);
  for (size_t i = 0; i + 1 < 24; ++i) EXPECT_LE(index.samples[i].label, index.samples[i + 1].label);
  EXPECT_NE(index.samples[0].path.find("class_000/class_000_train_00000000.JPEG"),
            std::string::npos);
  ASSERT_GE(index.notes.size(), 2u);
  EXPECT_NE(index.notes.back().find("class 3 (class_003) has no image"), std::string::npos);
  EXPECT_THROW(scan_image_folder((dir_ / "val").string()), InvalidArgument);
  EXPECT_THROW(scan_image_folder((dir_ / "nowhere").string()), InvalidArgument);
}

TEST(EpochOrder, EverySampleOncePerEpochAcrossTheRanks) {
  const int64_t n = 103, batch = 4, ranks = 3, steps = n / (batch * ranks);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const std::vector<int64_t> order = epoch_order(n, 9, epoch);
    std::multiset<int64_t> seen;
    for (int64_t step = 0; step < steps; ++step) {
      for (int64_t rank = 0; rank < ranks; ++rank) {
        const int64_t first = batch_start(step, rank, batch, ranks);
        for (int64_t i = 0; i < batch; ++i) seen.insert(order[static_cast<size_t>(first + i)]);
      }
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(steps * batch * ranks));
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), seen.size()) << "a repeat";
  }
  EXPECT_NE(epoch_order(n, 9, 0), epoch_order(n, 9, 1));
  EXPECT_EQ(epoch_order(n, 9, 1), epoch_order(n, 9, 1));
}

// Two epochs of batches from `threads` workers.
std::vector<ImageLoader::Batch> two_epochs(const ImageFolderIndex& index, int64_t threads) {
  ImageLoaderOptions o;
  o.batch = 5;
  o.image_size = 16;
  o.threads = threads;
  o.prefetch = 3;
  o.seed = 4;
  ImageLoader loader(index.samples, o);
  std::vector<ImageLoader::Batch> out;
  for (int64_t i = 0; i < 2 * loader.steps_per_epoch(); ++i) out.push_back(loader.next());
  return out;
}

TEST_F(ImageLoaderTest, TheSameBytesWhateverTheThreadCount) {
  const ImageFolderIndex index = scan_image_folder((dir_ / "train").string());
  const auto one = two_epochs(index, 1), three = two_epochs(index, 3);
  ASSERT_EQ(one.size(), 8u);  // 24 / 5: 4 steps an epoch
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i].epoch, static_cast<int64_t>(i / 4));
    EXPECT_EQ(one[i].images, three[i].images) << "batch " << i;
    EXPECT_EQ(one[i].labels, three[i].labels) << "batch " << i;
    for (float v : one[i].images) ASSERT_TRUE(v > -2.2f && v < 2.7f) << v;  // normalised bytes
  }
  EXPECT_NE(one[0].images, one[4].images);  // another epoch, another order and other crops
}

TEST_F(ImageLoaderTest, ABadFileIsSkippedCountedAndNamedOnceOrEndsTheRun) {
  ImageFolderIndex index = scan_image_folder((dir_ / "train").string());
  const std::string bad = index.samples[3].path;
  std::ofstream(bad, std::ios::trunc) << "truncated";
  ImageLoaderOptions o;
  o.batch = 8;
  o.image_size = 8;
  o.threads = 2;
  {
    ImageLoader loader(index.samples, o);
    for (int64_t i = 0; i < 3 * loader.steps_per_epoch(); ++i) loader.next();
    const LoaderStats s = loader.stats();
    // Once an epoch; a worker may have begun the fourth epoch's first batch, and met it there.
    EXPECT_GE(s.skipped, 3);
    EXPECT_LE(s.skipped, 4);
    ASSERT_EQ(s.skipped_files.size(), 1u);
    EXPECT_NE(s.skipped_files[0].find(bad), std::string::npos) << s.skipped_files[0];
    EXPECT_EQ(s.images, 3 * 3 * 8);
  }
  o.fail_on_bad_image = true;
  ImageLoader strict(index.samples, o);
  try {
    for (int64_t i = 0; i < strict.steps_per_epoch(); ++i) strict.next();
    FAIL() << "a bad file was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
  // Every image bad: the loader gives up once it has tried each, naming the first.
  for (const ImageSample& s : index.samples) std::ofstream(s.path, std::ios::trunc) << "x";
  o.fail_on_bad_image = false;
  o.batch = 8;
  ImageLoader hopeless(index.samples, o);
  EXPECT_THROW(hopeless.next(), InvalidArgument);
  o.batch = 25;  // more than the 24 images
  EXPECT_THROW(ImageLoader(index.samples, o), InvalidArgument);
}

// A CMYK JPEG is converted, not skipped; a truncated one is skipped, and no other image with it.
TEST_F(ImageLoaderTest, ACmykFileIsConvertedAndABrokenOneSkippedAlone) {
  std::ifstream in(source_dir() + "/tests/unit/fixtures/pil/cmyk.jpg", std::ios::binary);
  const std::string cmyk{std::istreambuf_iterator<char>(in), {}};
  ASSERT_FALSE(cmyk.empty());
  ImageFolderIndex index = scan_image_folder((dir_ / "train").string());
  std::ofstream(index.samples[5].path, std::ios::binary | std::ios::trunc) << cmyk;
  std::ofstream(index.samples[3].path, std::ios::binary | std::ios::trunc)
      << cmyk.substr(0, cmyk.size() / 2);
  ImageLoaderOptions o;
  o.batch = 8;
  o.image_size = 8;
  o.threads = 1;
  ImageLoader loader(index.samples, o);
  for (int64_t i = 0; i < 2 * loader.steps_per_epoch(); ++i) loader.next();
  const LoaderStats s = loader.stats();
  ASSERT_EQ(s.skipped_files.size(), 1u);
  EXPECT_NE(s.skipped_files[0].find(index.samples[3].path), std::string::npos)
      << s.skipped_files[0];
  EXPECT_GE(s.skipped, 2);  // once an epoch (the third's first batch may have begun)
  EXPECT_LE(s.skipped, 3);
}

// File names are bytes: a good image whose name is not UTF-8 is read like any other, and a bad
// one is skipped and named with its odd bytes as \xNN (records are JSON text).
TEST_F(ImageLoaderTest, NamesThatAreNotUtf8AreReadAndNamedEscaped) {
  ImageFolderIndex index = scan_image_folder((dir_ / "train").string());
  const std::filesystem::path good = dir_ / "train" / "class_001" / "caf\xE9.JPEG";
  std::filesystem::rename(index.samples[4].path, good);
  std::ofstream(dir_ / "train" / "class_002" / "bad\xFF.JPEG") << "not a picture";
  index = scan_image_folder((dir_ / "train").string());
  ASSERT_EQ(index.samples.size(), 25u);
  ImageLoaderOptions o;
  o.batch = 8;
  o.image_size = 8;
  ImageLoader loader(index.samples, o);
  for (int64_t i = 0; i < 2 * loader.steps_per_epoch(); ++i) loader.next();  // 48 of 25: both
  const LoaderStats s = loader.stats();
  ASSERT_EQ(s.skipped_files.size(), 1u);
  EXPECT_NE(s.skipped_files[0].find("class_002/bad\\xFF.JPEG: not a JPEG"), std::string::npos)
      << s.skipped_files[0];
  EXPECT_NO_THROW((void)nlohmann::json(s.skipped_files).dump());
}

}  // namespace
}  // namespace dlb
