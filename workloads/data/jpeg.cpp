#include "workloads/data/jpeg.h"

#include <fmt/format.h>
#include <jpeglib.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>  // before jpeglib.h, which names FILE and includes nothing for it
#include <cstring>
#include <limits>
#include <memory>

#include "runtime/core/error.h"

namespace dlb {
namespace {

struct HandleCloser {
  void operator()(void* h) const { tjDestroy(h); }
};
using Handle = std::unique_ptr<void, HandleCloser>;

// This thread's TurboJPEG decompressor, which reads headers (the decodes make their own). After a
// refused header it is made again, as a precaution: the handle once decoded too, and
// libjpeg-turbo 2.1.5's, once a CMYK decode had failed, read the next file's header as 0x0.
Handle& thread_decompressor() {
  thread_local Handle h;
  return h;
}
void* decompressor() {
  Handle& h = thread_decompressor();
  if (!h) h.reset(tjInitDecompress());
  if (!h) throw IoError(fmt::format("TurboJPEG: {}", tjGetErrorStr2(nullptr)));
  return h.get();
}
// `read` on this thread's decompressor; the decompressor made again if it throws.
template <typename Read>
auto with_decompressor(Read read) {
  try {
    return read(decompressor());
  } catch (...) {
    thread_decompressor().reset();
    throw;
  }
}

// The largest side TurboJPEG takes is an int's. The most pixels decoded: 64 Mi (192 MiB of RGB),
// beyond the largest photographs of ImageNet (about 32 M); a file that claims more is refused
// before anything is allocated (at the DCT scale it is decoded at).
constexpr int64_t kMaxSide = std::numeric_limits<int>::max() / 4;
constexpr int64_t kMaxPixels = int64_t{1} << 26;

void check_pixels(int64_t width, int64_t height, const std::string& where) {
  if (width * height > kMaxPixels) {
    throw InvalidArgument(
        fmt::format("{}: a {}x{} image is more than the {} Mi pixels dlbench decodes", where, width,
                    height, kMaxPixels >> 20));
  }
}

unsigned long checked_size(size_t size, const std::string& where) {
  if (size == 0) throw InvalidArgument(fmt::format("{}: empty file, not a JPEG", where));
  if (size > std::numeric_limits<unsigned long>::max()) {
    throw InvalidArgument(fmt::format("{}: {} bytes is too large a JPEG", where, size));
  }
  return static_cast<unsigned long>(size);
}

[[noreturn]] void refuse(void* h, const std::string& where, const char* what) {
  throw InvalidArgument(fmt::format("{}: {} ({})", where, what, tjGetErrorStr2(h)));
}

JpegHeader header_of(void* h, const uint8_t* data, size_t size, const std::string& where) {
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(h, data, checked_size(size, where), &width, &height, &subsamp,
                          &colorspace) != 0) {
    refuse(h, where, "not a JPEG libjpeg-turbo reads");
  }
  if (width <= 0 || height <= 0 || width > kMaxSide || height > kMaxSide) {
    throw InvalidArgument(
        fmt::format("{}: a {}x{} JPEG is outside what dlbench decodes", where, width, height));
  }
  return {width, height, colorspace == TJCS_GRAY,
          colorspace == TJCS_CMYK || colorspace == TJCS_YCCK};
}

// PIL's conversion of a CMYK JPEG to RGB, as ImageFolder's loader makes it: the decoded values
// read as Adobe's inverted CMYK (PIL's rawmode "CMYK;I"), then its cmyk2rgb, with k' = 255 - k:
// each channel k' - k' x c / 255, c its inverted value, the product rounded as its MULDIV255
// does. `cmyk`: the decode's bytes, 4 a pixel.
void cmyk_to_rgb(const std::vector<uint8_t>& cmyk, uint8_t* rgb) {
  const auto muldiv255 = [](int a, int b) {
    const int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
  };
  for (size_t i = 0, o = 0; i < cmyk.size(); i += 4, o += 3) {
    const int k = cmyk[i + 3];  // 255 - PIL's inverted k
    for (size_t c = 0; c < 3; ++c) {
      rgb[o + c] = static_cast<uint8_t>(std::clamp(k - muldiv255(255 - cmyk[i + c], k), 0, 255));
    }
  }
}

// The smallest of 1/8, 1/4, 1/2 and 1 whose image is at least min_width x min_height: the scales
// libjpeg-turbo's IDCT has SIMD code for (its others, 3/8 and the like, are plain C, and slower
// here than a whole decode: measured by bench input's dlbench-full-decode).
tjscalingfactor smallest_scale(const JpegHeader& h, int64_t min_width, int64_t min_height) {
  int count = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&count);
  tjscalingfactor best{1, 1};
  if (min_width <= 0 && min_height <= 0) return best;  // no request: full size
  for (int i = 0; factors && i < count; ++i) {
    const tjscalingfactor f = factors[i];
    if (f.num != 1 || (f.denom != 1 && f.denom != 2 && f.denom != 4 && f.denom != 8)) continue;
    const bool covers = TJSCALED(h.width, f) >= min_width && TJSCALED(h.height, f) >= min_height;
    if (covers && TJSCALED(h.width, f) < TJSCALED(h.width, best)) best = f;
  }
  return best;
}

// libjpeg's errors, and its warnings as TurboJPEG's TJFLAG_STOPONWARNING makes them: both end
// the decode, jumping back to decode_rows with libjpeg's message.
struct JpegErrors {
  jpeg_error_mgr mgr;
  std::jmp_buf back;
  char message[JMSG_LENGTH_MAX];
};
void jpeg_failed(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegErrors*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->back, 1);
}
void jpeg_emit(j_common_ptr c, int level) {
  if (level < 0) jpeg_failed(c);  // a warning (corrupt data); traces (level >= 0) are not
}

// What decode_rows decodes: `box` of the image at 1/denom (width x height there), as `channels`
// bytes a pixel (4: CMYK, as stored), into `out` (box.height x box.width x channels), each row
// through `row` (width x channels).
struct RowsRequest {
  int denom = 1, channels = 3;
  int64_t width = 0, height = 0;
  CropBox box;
  uint8_t* row = nullptr;
  uint8_t* out = nullptr;
};

// The rows of `r.box`, by libjpeg's scanline calls: the ones above skipped, the columns cropped
// to the box and a margin of an iMCU each side, three in a progressive file (chroma upsampling
// reads one sample past a column's own, block smoothing two blocks; without the margin, a box's
// edge columns differ from a whole decode's), then the rows below it skipped but for the last,
// so that all of the file's data is decoded as a whole decode decodes it (its errors and
// warnings too). Only plain C between the setjmp and the jumps to it. False with `e.message`
// where libjpeg fails.
bool decode_rows(const uint8_t* data, unsigned long size, const RowsRequest& r, JpegErrors& e) {
  jpeg_decompress_struct ci;
  std::memset(&ci, 0, sizeof ci);  // so that a failure in jpeg_create_decompress destroys safely
  ci.err = jpeg_std_error(&e.mgr);
  e.mgr.error_exit = jpeg_failed;
  e.mgr.emit_message = jpeg_emit;
  if (setjmp(e.back)) {
    jpeg_destroy_decompress(&ci);
    return false;
  }
  jpeg_create_decompress(&ci);
  jpeg_mem_src(&ci, data, size);
  jpeg_read_header(&ci, TRUE);
  ci.out_color_space = r.channels == 4 ? JCS_CMYK : JCS_EXT_RGB;
  ci.dct_method = JDCT_ISLOW;  // TJFLAG_ACCURATEDCT's
  ci.scale_num = 1;
  ci.scale_denom = static_cast<unsigned>(r.denom);
  jpeg_start_decompress(&ci);
  if (static_cast<int64_t>(ci.output_width) != r.width ||
      static_cast<int64_t>(ci.output_height) != r.height) {
    std::snprintf(e.message, sizeof e.message, "decoded at %ux%u, not the header's size",
                  ci.output_width, ci.output_height);
    jpeg_destroy_decompress(&ci);
    return false;
  }
  // A progressive file whose scans leave low coefficients unsent is smoothed (libjpeg's block
  // smoothing), which reads the DC of the two blocks each side of a block, and at a crop's first
  // block repeats its own: three iMCUs of margin there (decode_jpeg_box's test has such files).
  const auto imcu = static_cast<int64_t>(ci.max_h_samp_factor * ci.min_DCT_scaled_size);
  const int64_t margin = ci.progressive_mode ? 3 * imcu : imcu;
  const int64_t left = std::max<int64_t>(r.box.left - margin, 0);
  const int64_t right = std::min(r.box.left + r.box.width + margin, r.width);
  auto x = static_cast<JDIMENSION>(left), w = static_cast<JDIMENSION>(right - left);
  if (w < ci.output_width) jpeg_crop_scanline(&ci, &x, &w);  // x to an iMCU's edge, w grows
  if (r.box.top > 0) jpeg_skip_scanlines(&ci, static_cast<JDIMENSION>(r.box.top));
  const size_t skip = (static_cast<size_t>(r.box.left) - x) * static_cast<size_t>(r.channels);
  const size_t bytes = static_cast<size_t>(r.box.width * r.channels);
  for (int64_t y = 0; y < r.box.height; ++y) {
    JSAMPROW row = r.row;
    jpeg_read_scanlines(&ci, &row, 1);
    std::memcpy(r.out + static_cast<size_t>(y) * bytes, r.row + skip, bytes);
  }
  // The rows below: all but the last skipped, and the last read, since a skip to the end
  // decodes nothing (libjpeg-turbo only moves its count), and a file cut short there would pass.
  if (ci.output_scanline + 1 < ci.output_height) {
    jpeg_skip_scanlines(&ci, ci.output_height - ci.output_scanline - 1);
  }
  while (ci.output_scanline < ci.output_height) {
    JSAMPROW row = r.row;
    jpeg_read_scanlines(&ci, &row, 1);
  }
  jpeg_finish_decompress(&ci);
  jpeg_destroy_decompress(&ci);
  return true;
}

// decode_jpeg's image (`box`: null) or decode_jpeg_box's (`box` in the file's full-size pixels).
RgbImage decode_scaled(const uint8_t* data, size_t size, const std::string& where,
                       int64_t min_width, int64_t min_height, const CropBox* box) {
  const JpegHeader h = with_decompressor([&](void* t) { return header_of(t, data, size, where); });
  if (box && (box->top < 0 || box->left < 0 || box->height < 1 || box->width < 1 ||
              box->top + box->height > h.height || box->left + box->width > h.width)) {
    throw InvalidArgument(fmt::format("{}: a box of {}x{} at ({}, {}) outside its {}x{} pixels",
                                      where, box->width, box->height, box->left, box->top, h.width,
                                      h.height));
  }
  const tjscalingfactor scale = smallest_scale(h, min_width, min_height);
  RowsRequest r;
  r.denom = scale.denom;
  r.channels = h.cmyk ? 4 : 3;
  r.width = TJSCALED(h.width, scale);
  r.height = TJSCALED(h.height, scale);
  check_pixels(r.width, r.height, where);
  r.box = box ? scaled_box(*box, h.width, h.height, r.width, r.height)
              : CropBox{0, 0, r.height, r.width};
  std::vector<uint8_t> row(static_cast<size_t>(r.width * r.channels));
  std::vector<uint8_t> out(static_cast<size_t>(r.box.width * r.box.height * r.channels));
  r.row = row.data();
  r.out = out.data();
  JpegErrors errors;
  if (!decode_rows(data, checked_size(size, where), r, errors)) {
    throw InvalidArgument(
        fmt::format("{}: a corrupt or truncated JPEG ({})", where, errors.message));
  }
  RgbImage image{r.box.width, r.box.height, std::move(out)};
  if (h.cmyk) {
    std::vector<uint8_t> rgb(static_cast<size_t>(r.box.width * r.box.height * 3));
    cmyk_to_rgb(image.pixels, rgb.data());
    image.pixels = std::move(rgb);
  }
  return image;
}

}  // namespace

std::vector<uint8_t> encode_jpeg(const RgbImage& image, int quality) {
  if (image.width <= 0 || image.height <= 0 || image.width > kMaxSide || image.height > kMaxSide ||
      image.pixels.size() != static_cast<size_t>(image.width * image.height * 3)) {
    throw InvalidArgument(fmt::format("encode_jpeg: a {}x{} image with {} bytes", image.width,
                                      image.height, image.pixels.size()));
  }
  if (quality < 1 || quality > 100) {
    throw InvalidArgument(fmt::format("encode_jpeg: quality {} is not in 1-100", quality));
  }
  Handle h(tjInitCompress());
  if (!h) throw IoError(fmt::format("TurboJPEG: {}", tjGetErrorStr2(nullptr)));
  unsigned char* out = nullptr;
  unsigned long out_size = 0;
  if (tjCompress2(h.get(), image.pixels.data(), static_cast<int>(image.width), 0,
                  static_cast<int>(image.height), TJPF_RGB, &out, &out_size, TJSAMP_420, quality,
                  TJFLAG_ACCURATEDCT) != 0) {
    tjFree(out);
    throw IoError(fmt::format("TurboJPEG could not encode: {}", tjGetErrorStr2(h.get())));
  }
  std::vector<uint8_t> bytes(out, out + out_size);
  tjFree(out);
  return bytes;
}

JpegHeader read_jpeg_header(const uint8_t* data, size_t size, const std::string& where) {
  return with_decompressor([&](void* h) { return header_of(h, data, size, where); });
}

RgbImage decode_jpeg(const uint8_t* data, size_t size, const std::string& where, int64_t min_width,
                     int64_t min_height) {
  return decode_scaled(data, size, where, min_width, min_height, nullptr);
}

CropBox scaled_box(const CropBox& box, int64_t width, int64_t height, int64_t scaled_width,
                   int64_t scaled_height) {
  if (scaled_width == width && scaled_height == height) return box;
  const double fx = static_cast<double>(scaled_width) / static_cast<double>(width);
  const double fy = static_cast<double>(scaled_height) / static_cast<double>(height);
  const auto left =
      std::min(static_cast<int64_t>(static_cast<double>(box.left) * fx), scaled_width - 1);
  const auto top =
      std::min(static_cast<int64_t>(static_cast<double>(box.top) * fy), scaled_height - 1);
  return {top, left,
          std::clamp<int64_t>(std::llround(static_cast<double>(box.height) * fy), 1,
                              scaled_height - top),
          std::clamp<int64_t>(std::llround(static_cast<double>(box.width) * fx), 1,
                              scaled_width - left)};
}

RgbImage decode_jpeg_box(const uint8_t* data, size_t size, const std::string& where,
                         int64_t min_width, int64_t min_height, const CropBox& box) {
  return decode_scaled(data, size, where, min_width, min_height, &box);
}

}  // namespace dlb
