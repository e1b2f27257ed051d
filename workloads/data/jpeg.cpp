#include "workloads/data/jpeg.h"

#include <fmt/format.h>
#include <turbojpeg.h>

#include <algorithm>
#include <limits>
#include <memory>

#include "runtime/core/error.h"

namespace dlb {
namespace {

struct HandleCloser {
  void operator()(void* h) const { tjDestroy(h); }
};
using Handle = std::unique_ptr<void, HandleCloser>;

// This thread's decompressor: the loader's threads decode image after image with one. After a
// refused file it is made again: libjpeg-turbo 2.1.5's handle, once a CMYK decode had failed,
// read the next file's header as 0x0 (tests/unit/jpeg_test.cpp).
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

// The decode of decode_jpeg on `h`.
RgbImage decode_with(void* h, const uint8_t* data, size_t size, const std::string& where,
                     int64_t min_width, int64_t min_height) {
  const JpegHeader header = header_of(h, data, size, where);
  const tjscalingfactor scale = smallest_scale(header, min_width, min_height);
  RgbImage image;
  image.width = TJSCALED(header.width, scale);
  image.height = TJSCALED(header.height, scale);
  check_pixels(image.width, image.height, where);
  image.pixels.resize(static_cast<size_t>(image.width * image.height * 3));
  // A CMYK JPEG is decoded as it is stored, then converted as PIL converts it.
  std::vector<uint8_t> cmyk(header.cmyk ? static_cast<size_t>(image.width * image.height * 4) : 0);
  // TJFLAG_STOPONWARNING: a corrupt or truncated file is an error, not an image padded with grey.
  if (tjDecompress2(h, data, checked_size(size, where),
                    header.cmyk ? cmyk.data() : image.pixels.data(), static_cast<int>(image.width),
                    0, static_cast<int>(image.height), header.cmyk ? TJPF_CMYK : TJPF_RGB,
                    TJFLAG_ACCURATEDCT | TJFLAG_STOPONWARNING) != 0) {
    refuse(h, where, "a corrupt or truncated JPEG");
  }
  if (header.cmyk) cmyk_to_rgb(cmyk, image.pixels.data());
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
  return with_decompressor(
      [&](void* h) { return decode_with(h, data, size, where, min_width, min_height); });
}

}  // namespace dlb
