// Labelled image data sets held on the host, NCHW f32 images and int64 labels.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/rng.h"
#include "runtime/core/shape.h"

namespace dlb {

struct Dataset {
  int64_t channels = 0, height = 0, width = 0, num_classes = 0;
  std::vector<float> images;  // [size, channels, height, width]
  std::vector<int64_t> labels;

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  int64_t image_elems() const { return channels * height * width; }
  // Copies samples `indices` into the given host arrays.
  void gather(const std::vector<int64_t>& indices, float* images_out, int64_t* labels_out) const;
};

struct DigitsSplit {
  Dataset train, test;
};

// Default location of scikit-learn's digits.csv.gz (Debian's python3-sklearn); the environment
// variable DLB_DIGITS_PATH overrides it.
std::string default_digits_path();
// The digits of a CSV text (`source` names it in errors): one sample per line, 64 pixels in
// [0, 16] then a label 0-9, comma-separated, nothing else. Pixels are scaled to [0, 1]; the
// result is [N, 1, 8, 8]. InvalidArgument names the line and the field for anything else.
Dataset parse_digits_csv(std::string_view text, const std::string& source);
// Loads the 1,797 8x8 digits, scales pixels to [0, 1], upsamples by an integer factor to
// `image_size` (a multiple of 8; nearest neighbour), repeats the grey channel `channels` times
// (3 for the ImageNet models), and splits them with a fixed shuffle: 80% train, 20% test.
// Throws IoError naming the path if the file is missing.
DigitsSplit load_digits(const std::string& path, int64_t image_size, int64_t channels = 1);

// Random NCHW images, N(0, 1), and uniform labels, reproducible from the seed.
Dataset make_synthetic(int64_t batch, int64_t channels, int64_t image_size, int64_t num_classes,
                       uint64_t seed);

}  // namespace dlb
