// A generated image data set of real JPEG files, for the input pipeline where no data set can be
// downloaded (`dlbench make-dataset`). Each class has a look of its own (a hue, and stripes of
// its own orientation and frequency) and each image its own phase, brightness, noise and size, so
// a model can learn the classes and a time-to-accuracy run means something. Written in both
// layouts large-scale training reads:
//   - ImageNet's folders, as torchvision's ImageFolder reads them: train/<class>/<file>.JPEG and
//     val/<class>/<file>.JPEG, the labels the classes' sorted names;
//   - WebDataset's tar shards: shards/shard-NNNNNN.tar, each training image as key.jpg beside
//     key.cls (its label, in decimal), the training images split over the shards in order.
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "workloads/data/jpeg.h"

namespace dlb {

struct MakeDatasetOptions {
  int64_t images = 1000;     // training images, classes taking turns (image i is class i % K)
  int64_t val_images = 200;  // validation images, likewise
  int64_t classes = 10;
  int64_t width = 400, height = 350;  // the mean size (ImageNet's is about 400 x 350)
  int64_t shards = 1;                 // 0: folders only
  int quality = 90;
  uint64_t seed = 0;
};

// InvalidArgument naming the option for a value outside what make_dataset takes.
void check_make_dataset(const MakeDatasetOptions& o);

// The class's folder name: class_000, class_001, ... (as many digits as the count needs, at
// least 3), so that sorting the names sorts the labels.
std::string class_name(int64_t label, int64_t classes);

// Image `index` of class `label`: its size drawn from 0.6 to 1.4 times the mean in each side
// (at least 8 pixels), its pixels from (seed, stream) alone: the same on every machine.
RgbImage generated_image(int64_t label, uint64_t stream, const MakeDatasetOptions& o);

struct DatasetFiles {
  int64_t train = 0, val = 0, shards = 0;
  uint64_t bytes = 0;  // of JPEG data
};

// Writes the data set into `dir`, which must exist and be empty.
DatasetFiles write_dataset(const std::string& dir, const MakeDatasetOptions& o);

// Writes the data set into a new folder beside `out` and renames it to `out` once complete, so
// that a failed or interrupted run leaves nothing under that name. `out` must not exist, or be an
// empty folder (InvalidArgument otherwise, naming it as `flag`).
DatasetFiles write_dataset_atomically(const std::string& out, const MakeDatasetOptions& o,
                                      const std::string& flag = "--out");

// "WxH", each a whole number (InvalidArgument naming `flag` otherwise).
std::pair<int64_t, int64_t> parse_image_size(const std::string& text,
                                             const std::string& flag = "--size");

}  // namespace dlb
