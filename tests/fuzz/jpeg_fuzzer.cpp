// libFuzzer target: a JPEG file (make-dataset's, and the input pipeline's images). Any bytes are
// decoded or refused with a dlb::Error; what is decoded has the header's size at the scale asked
// for (full, and at least a quarter of each side), and every pixel's three bytes. A box of the
// image (drawn from a hash of the bytes) decodes as the whole image does there, bit for bit, at
// full size and at the quarter's DCT scale, and is refused exactly where the whole image is: the
// loader's crops (decode_jpeg_box) accept and refuse the files a whole decode does, wherever the
// crop falls.
#include <cstdint>
#include <cstdlib>
#include <optional>

#include "tests/fuzz/fuzz_target.h"
#include "workloads/data/augment.h"
#include "workloads/data/jpeg.h"

namespace {

// `read`'s result, or nothing where it refuses the bytes with a dlb::Error.
template <typename Read>
std::optional<dlb::RgbImage> decoded(Read read) {
  try {
    return read();
  } catch (const dlb::Error&) {
    return std::nullopt;
  }
}

// A box inside a w x h image, from `seed`.
dlb::CropBox box_of(uint64_t seed, int64_t w, int64_t h) {
  const auto top = static_cast<int64_t>(seed % static_cast<uint64_t>(h));
  const auto left = static_cast<int64_t>((seed / 7) % static_cast<uint64_t>(w));
  return {top, left, 1 + static_cast<int64_t>((seed / 13) % static_cast<uint64_t>(h - top)),
          1 + static_cast<int64_t>((seed / 17) % static_cast<uint64_t>(w - left))};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return dlb::fuzz::run_reader([&] {
    const dlb::JpegHeader h = dlb::read_jpeg_header(data, size, "image.JPEG");
    uint64_t hash = 14695981039346656037u;  // FNV-1a of the bytes
    for (size_t i = 0; i < size; ++i) hash = (hash ^ data[i]) * 1099511628211u;
    const dlb::CropBox box = box_of(hash, h.width, h.height);
    const std::optional<dlb::RgbImage> part =
        decoded([&] { return dlb::decode_jpeg_box(data, size, "image.JPEG", 0, 0, box); });
    const std::optional<dlb::RgbImage> whole =
        decoded([&] { return dlb::decode_jpeg(data, size, "image.JPEG"); });
    if (part.has_value() != whole.has_value()) std::abort();
    if (!whole) return;
    const dlb::RgbImage& full = *whole;
    if (full.width != h.width || full.height != h.height) std::abort();
    if (full.pixels.size() != static_cast<size_t>(full.width * full.height * 3)) std::abort();
    if (part->pixels != dlb::crop(full, box).pixels) std::abort();
    const dlb::RgbImage small =
        dlb::decode_jpeg(data, size, "image.JPEG", h.width / 4, h.height / 4);
    if (small.width < h.width / 4 || small.height < h.height / 4) std::abort();
    if (small.width > h.width || small.height > h.height) std::abort();
    const dlb::RgbImage small_part =
        dlb::decode_jpeg_box(data, size, "image.JPEG", h.width / 4, h.height / 4, box);
    const dlb::CropBox at = dlb::scaled_box(box, h.width, h.height, small.width, small.height);
    if (small_part.pixels != dlb::crop(small, at).pixels) std::abort();
  });
}
