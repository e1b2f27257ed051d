#include "workloads/data/augment.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/resample.h"
#include "workloads/data/resample_loops.h"

namespace dlb {
namespace {

void check_box(const RgbImage& image, const CropBox& b) {
  if (b.top < 0 || b.left < 0 || b.height < 1 || b.width < 1 || b.top + b.height > image.height ||
      b.left + b.width > image.width) {
    throw InvalidArgument(fmt::format("crop ({}, {}, {}, {}) outside a {}x{} image", b.top, b.left,
                                      b.height, b.width, image.width, image.height));
  }
}

}  // namespace

CropBox random_resized_crop_box(int64_t width, int64_t height, Rng& rng) {
  const double area = static_cast<double>(width * height);
  const double log_lo = std::log(3.0 / 4.0), log_hi = std::log(4.0 / 3.0);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (0.08 + 0.92 * static_cast<double>(rng.uniform()));
    const double aspect = std::exp(log_lo + (log_hi - log_lo) * static_cast<double>(rng.uniform()));
    const auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(target * aspect)));
    const auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(target / aspect)));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int64_t top = rng.below(height - h + 1), left = rng.below(width - w + 1);
      return {top, left, h, w};
    }
  }
  const double ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width, h = height;
  if (ratio < 3.0 / 4.0) {
    h = static_cast<int64_t>(std::nearbyint(static_cast<double>(w) / (3.0 / 4.0)));
  } else if (ratio > 4.0 / 3.0) {
    w = static_cast<int64_t>(std::nearbyint(static_cast<double>(h) * (4.0 / 3.0)));
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

RgbImage crop(const RgbImage& image, const CropBox& box) {
  check_box(image, box);
  RgbImage out{box.width, box.height,
               std::vector<uint8_t>(static_cast<size_t>(box.width * box.height * 3))};
  for (int64_t y = 0; y < box.height; ++y) {
    const uint8_t* row = image.pixels.data() + ((box.top + y) * image.width + box.left) * 3;
    std::copy(row, row + box.width * 3, out.pixels.data() + y * box.width * 3);
  }
  return out;
}

RgbImage resized_crop(const RgbImage& image, const CropBox& box, int64_t out_width,
                      int64_t out_height) {
  check_box(image, box);
  if (out_width < 1 || out_height < 1) {
    throw InvalidArgument(fmt::format("resize to {}x{}", out_width, out_height));
  }
  // PIL's order: the horizontal pass over the rows the vertical pass reads, then the vertical.
  // Both read the box in place: PIL crops first, and its taps never leave the crop.
  const ResampleTaps across = resample_taps(box.width, out_width);
  ResampleTaps down = resample_taps(box.height, out_height);
  const int64_t first = down.first.front();
  const int64_t last = down.first.back() + down.count.back();
  std::vector<uint8_t> wide(static_cast<size_t>(out_width * (last - first) * 3));
  const uint8_t* corner = image.pixels.data() + (box.top * image.width + box.left) * 3;
  const ResampleLoops& loops = resample_loops(host_cpu_isa());
  loops.rows(corner, image.width, first, last - first, wide.data(), out_width, across);
  for (int64_t& f : down.first) f -= first;  // rows of `wide`, which begins at `first`
  RgbImage out{out_width, out_height,
               std::vector<uint8_t>(static_cast<size_t>(out_width * out_height * 3))};
  loops.columns(wide.data(), out_width, out.pixels.data(), out_height, down);
  return out;
}

void flip_horizontally(RgbImage& image) {
  for (int64_t y = 0; y < image.height; ++y) {
    uint8_t* row = image.pixels.data() + y * image.width * 3;
    for (int64_t l = 0, r = image.width - 1; l < r; ++l, --r) {
      std::swap_ranges(row + l * 3, row + l * 3 + 3, row + r * 3);
    }
  }
}

RgbImage eval_transform(const RgbImage& image, int64_t size) {
  const int64_t resize_short = size * 256 / 224;
  const bool wide = image.width > image.height;
  const int64_t shorter = wide ? image.height : image.width;
  const int64_t longer = wide ? image.width : image.height;
  const auto resized_long =
      static_cast<int64_t>(static_cast<double>(resize_short) * static_cast<double>(longer) /
                           static_cast<double>(shorter));
  const int64_t w = wide ? resized_long : resize_short, h = wide ? resize_short : resized_long;
  // A strip of an image resizes to a longer strip: refused before anything that size exists.
  if (w < size || h < size || w * h > (int64_t{1} << 26)) {
    throw InvalidArgument(fmt::format(
        "a {}x{} image resizes to {}x{} for its {} px centre crop: outside what dlbench resizes",
        image.width, image.height, w, h, size));
  }
  const RgbImage resized = resized_crop(image, {0, 0, image.height, image.width}, w, h);
  const auto top = static_cast<int64_t>(std::nearbyint(static_cast<double>(h - size) / 2.0));
  const auto left = static_cast<int64_t>(std::nearbyint(static_cast<double>(w - size) / 2.0));
  return crop(resized, {top, left, size, size});
}

void normalize_to_planes(const RgbImage& image, float* out) {
  // Each channel's 256 values, computed as ToTensor then Normalize compute them (a division by
  // 255, the mean subtracted, a division by the deviation), then looked up.
  static const auto table = [] {
    std::array<std::array<float, 256>, 3> t{};
    for (size_t c = 0; c < 3; ++c) {
      for (size_t v = 0; v < 256; ++v) {
        t[c][v] = (static_cast<float>(v) / 255.f - kImageNetMean[c]) / kImageNetStd[c];
      }
    }
    return t;
  }();
  const int64_t plane = image.width * image.height;
  const uint8_t* px = image.pixels.data();
  for (int64_t p = 0; p < plane; ++p) {
    out[p] = table[0][px[p * 3]];
    out[plane + p] = table[1][px[p * 3 + 1]];
    out[2 * plane + p] = table[2][px[p * 3 + 2]];
  }
}

}  // namespace dlb
