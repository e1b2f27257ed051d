// libFuzzer target: a JPEG file (make-dataset's, and the input pipeline's images). Any bytes are
// decoded or refused with a dlb::Error; what is decoded has the header's size at the scale asked
// for (full, and at least a quarter of each side), and every pixel's three bytes.
#include <cstdint>
#include <cstdlib>

#include "tests/fuzz/fuzz_target.h"
#include "workloads/data/jpeg.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return dlb::fuzz::run_reader([&] {
    const dlb::JpegHeader h = dlb::read_jpeg_header(data, size, "image.JPEG");
    const dlb::RgbImage full = dlb::decode_jpeg(data, size, "image.JPEG");
    if (full.width != h.width || full.height != h.height) std::abort();
    if (full.pixels.size() != static_cast<size_t>(full.width * full.height * 3)) std::abort();
    const dlb::RgbImage small =
        dlb::decode_jpeg(data, size, "image.JPEG", h.width / 4, h.height / 4);
    if (small.width < h.width / 4 || small.height < h.height / 4) std::abort();
    if (small.width > h.width || small.height > h.height) std::abort();
  });
}
