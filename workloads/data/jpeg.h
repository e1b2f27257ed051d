// JPEG files through libjpeg-turbo: encoding for `dlbench make-dataset` and reading headers with
// its TurboJPEG API (Debian's libturbojpeg0-dev); decoding with its libjpeg API
// (libjpeg62-turbo-dev), at a reduced DCT scale where the caller needs no more pixels, as PIL's
// draft mode and DALI decode, and of a box alone where the caller needs no more. Each decode has
// a decompressor of its own: libjpeg keeps a file's quantization tables in the object that read
// it, so one reused across files decoded a file without tables with the last file's (what a
// thread decoded before changed what it accepted). Images are 8-bit RGB, rows top to bottom,
// pixels interleaved (HWC).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dlb {

struct RgbImage {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> pixels;  // height x width x 3
};

// A rectangle of an image's pixels.
struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;  // torchvision's (i, j, h, w)
  bool operator==(const CropBox& o) const {
    return top == o.top && left == o.left && height == o.height && width == o.width;
  }
};

// A JPEG of `image` at `quality` (1-100), 4:2:0 chroma subsampling (what PIL and most cameras
// write). InvalidArgument for an empty image, a pixel count that is not width x height x 3, or a
// quality outside 1-100.
std::vector<uint8_t> encode_jpeg(const RgbImage& image, int quality);

struct JpegHeader {
  int64_t width = 0, height = 0;
  bool grayscale = false;
  bool cmyk = false;  // CMYK or YCCK (decoded as CMYK)
};

// The image's size and colour space, from its header alone. InvalidArgument naming `where` for
// bytes that are not a JPEG TurboJPEG reads.
JpegHeader read_jpeg_header(const uint8_t* data, size_t size, const std::string& where);

// The image decoded to RGB (a grayscale JPEG's one channel in all three, and a CMYK or YCCK one
// read as Adobe's inverted CMYK and converted, as PIL's convert("RGB") does), at
// the smallest of libjpeg-turbo's DCT scales 1/8, 1/4, 1/2 and 1 that keeps it at least
// `min_width` x `min_height` (0 x 0: full size; a request larger than the image: full size).
// Scaling in the IDCT costs a fraction of a full decode and resizing after. InvalidArgument naming
// `where` for anything libjpeg-turbo reports, warnings included (a truncated file is refused, not
// padded), and for an image of more than 64 Mi pixels at that scale.
RgbImage decode_jpeg(const uint8_t* data, size_t size, const std::string& where,
                     int64_t min_width = 0, int64_t min_height = 0);

// `box` of a width x height image, in the pixels of the same image at scaled_width x
// scaled_height: its edges scaled (the top left rounded down, the sides to nearest) and kept
// inside, at least one pixel each way.
CropBox scaled_box(const CropBox& box, int64_t width, int64_t height, int64_t scaled_width,
                   int64_t scaled_height);

// decode_jpeg(data, size, where, min_width, min_height)'s pixels in `box` (given in the file's
// full-size pixels, scaled to the decode's by scaled_box), bit for bit, and no more: a
// box.height x box.width image at the decode's scale. The rows above the box are skipped (their
// data decoded but not transformed), those below it too but for the last, and the columns
// outside it neither transformed nor converted, beyond a margin of an iMCU or two each side
// (three or four in a progressive file), which chroma upsampling and block smoothing read.
// Every row's data is still decoded: a file decode_jpeg refuses is refused here too, wherever
// the box is. `box` must lie inside the image.
RgbImage decode_jpeg_box(const uint8_t* data, size_t size, const std::string& where,
                         int64_t min_width, int64_t min_height, const CropBox& box);

}  // namespace dlb
