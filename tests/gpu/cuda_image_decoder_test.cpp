// --decode=gpu on a GPU (runtime/backend/image_decoder.h; part of cuda_backend_tests, which exits
// 77 without one):
//   - images the loader decoded (EncodedImage::decoded) go through the kernels alone: the CPU
//     path's floats bit for bit, in f32 NCHW and bf16 channels last;
//   - JPEG files go through nvJPEG too, whose IDCT and chroma upsampling are not libjpeg-turbo's:
//     each image is checked against the CPU path on the same box and flip, in levels of 8 bits
//     (value x std x 255). A wrong image, channel order, row pitch or flip is tens of levels off
//     on average; two correct decoders differ by about one level where they differ at all;
//   - batches of changing sizes queued back to back, one of them progressive (the default
//     backend's, where the engines take the rest), each match the CPU path. A decoder state
//     started again for a new size, or a staging buffer reused, while the batch before still
//     decodes may show here (a race shows only when it is lost); with engines, only the hardware
//     state changes size between batches;
//   - a file whose header reads but whose data does not is refused, by name.
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/backend/image_decoder.h"
#include "runtime/core/error.h"
#include "runtime/core/half.h"
#include "runtime/core/rng.h"
#include "workloads/data/augment.h"
#include "workloads/data/jpeg.h"

namespace dlb {
namespace {

constexpr int64_t kSize = 32;

struct Images {
  std::vector<std::vector<uint8_t>> files;
  std::vector<RgbImage> decoded;  // by libjpeg-turbo, whole
  std::vector<std::string> names;
  std::vector<EncodedImage> views;
};

// Six JPEGs of assorted sizes with structure, each with a random box and flip, into `im` (filled
// in place: its views point into its own vectors).
void make_images(bool as_decoded, Images& im) {
  const int64_t sizes[][2] = {{400, 350}, {37, 53}, {120, 90}, {640, 480}, {64, 64}, {31, 200}};
  Rng rng(11);
  for (const auto& s : sizes) {
    RgbImage img{s[0], s[1], std::vector<uint8_t>(static_cast<size_t>(s[0] * s[1] * 3))};
    for (size_t i = 0; i < img.pixels.size(); ++i) {
      img.pixels[i] = static_cast<uint8_t>((i * 7 + (i / 97) * 13 + rng.below(30)) % 256);
    }
    im.files.push_back(encode_jpeg(img, 90));
    im.decoded.push_back(decode_jpeg(im.files.back().data(), im.files.back().size(), "test"));
  }
  for (size_t i = 0; i < im.files.size(); ++i) im.names.push_back("image " + std::to_string(i));
  for (size_t i = 0; i < im.files.size(); ++i) {
    const RgbImage& d = im.decoded[i];
    const CropBox b = random_resized_crop_box(d.width, d.height, rng);
    const bool flip = rng.uniform() < 0.5f;
    const uint8_t* data = as_decoded ? d.pixels.data() : im.files[i].data();
    const size_t size = as_decoded ? d.pixels.size() : im.files[i].size();
    im.views.push_back({data, size, as_decoded, d.width, d.height, b.top, b.left, b.height, b.width,
                        flip, im.names[i]});
  }
}

// The CPU path's floats (NCHW) for the views' boxes and flips on libjpeg-turbo's pixels.
std::vector<float> cpu_path(const Images& im) {
  std::vector<float> out(im.views.size() * 3 * kSize * kSize);
  for (size_t i = 0; i < im.views.size(); ++i) {
    const EncodedImage& v = im.views[i];
    RgbImage r = resized_crop(im.decoded[i], {v.top, v.left, v.crop_h, v.crop_w}, kSize, kSize);
    if (v.flip) flip_horizontally(r);
    normalize_to_planes(r, out.data() + i * 3 * kSize * kSize);
  }
  return out;
}

// What the decoder wrote into an [N, 3, S, S] tensor of `dtype` in `layout`, as NCHW floats.
std::vector<float> decode_on_gpu(Backend& gpu, ImageDecoder& decoder, const Images& im, DType dtype,
                                 Layout layout) {
  const auto n = static_cast<int64_t>(im.views.size());
  Tensor dst = gpu.empty({n, 3, kSize, kSize}, dtype, MemCategory::kActivations, "images", layout);
  const Backend::CopyMarks marks =
      decoder.decode(im.views, {kImageNetMean, kImageNetStd}, dst, gpu.clock().mark());
  gpu.wait_for_input(marks.end);
  std::vector<uint8_t> raw(dst.bytes());
  gpu.copy_to_host(dst, raw.data());
  std::vector<float> stored(static_cast<size_t>(dst.numel()));
  dtype_to_floats(raw.data(), dst.numel(), dtype, stored.data());
  if (layout == Layout::kNCHW) return stored;
  std::vector<float> nchw(stored.size());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < 3; ++c) {
      for (int64_t p = 0; p < kSize * kSize; ++p) {
        nchw[static_cast<size_t>((i * 3 + c) * kSize * kSize + p)] =
            stored[static_cast<size_t>((i * kSize * kSize + p) * 3 + c)];
      }
    }
  }
  return nchw;
}

class ImageDecoderGpu : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> gpu = make_backend(BackendKind::kCuda, {});
  std::unique_ptr<ImageDecoder> decoder = make_image_decoder(*gpu);
};

TEST_F(ImageDecoderGpu, DecodedImagesAreTheCpuPathBitForBit) {
  Images im;
  make_images(true, im);
  const std::vector<float> want = cpu_path(im);
  const std::vector<float> f32 = decode_on_gpu(*gpu, *decoder, im, DType::kF32, Layout::kNCHW);
  ASSERT_EQ(f32.size(), want.size());
  EXPECT_EQ(std::memcmp(f32.data(), want.data(), want.size() * sizeof(float)), 0);
  std::vector<uint16_t> rounded(want.size());
  floats_to_dtype(want.data(), static_cast<int64_t>(want.size()), DType::kBF16, rounded.data());
  std::vector<float> want_bf16(want.size());
  dtype_to_floats(rounded.data(), static_cast<int64_t>(want.size()), DType::kBF16,
                  want_bf16.data());
  const std::vector<float> bf16 = decode_on_gpu(*gpu, *decoder, im, DType::kBF16, Layout::kNHWC);
  EXPECT_EQ(std::memcmp(bf16.data(), want_bf16.data(), want.size() * sizeof(float)), 0);
}

// Each image of `got` within a level of `want` on average (views [first, first + n) of `im`).
void expect_within_a_level(const std::vector<float>& got, const std::vector<float>& want,
                           const Images& im, size_t first, const std::string& decoder) {
  const int64_t per_image = 3 * kSize * kSize;
  ASSERT_EQ(got.size() % static_cast<size_t>(per_image), 0u);
  const size_t n = got.size() / static_cast<size_t>(per_image);
  ASSERT_LE((first + n) * static_cast<size_t>(per_image), want.size());
  for (size_t j = 0; j < n; ++j) {
    const size_t i = first + j;
    double sum = 0, worst = 0;
    for (int64_t e = 0; e < per_image; ++e) {
      const size_t k = i * static_cast<size_t>(per_image) + static_cast<size_t>(e);
      const size_t g = j * static_cast<size_t>(per_image) + static_cast<size_t>(e);
      const double levels = std::fabs(got[g] - want[k]) *
                            kImageNetStd[static_cast<size_t>(e / (kSize * kSize))] * 255.0;
      sum += levels;
      worst = std::max(worst, levels);
    }
    const double mean = sum / static_cast<double>(per_image);
    std::printf("%s (%s): mean %.3f, worst %.1f levels from libjpeg-turbo's\n",
                std::string(im.views[i].name).c_str(), decoder.c_str(), mean, worst);
    EXPECT_LT(mean, 1.5) << im.views[i].name;
  }
}

TEST_F(ImageDecoderGpu, FilesDecodeWithinALevelOfLibjpegTurbo) {
  Images im;
  make_images(false, im);
  const std::vector<float> want = cpu_path(im);
  const std::vector<float> got = decode_on_gpu(*gpu, *decoder, im, DType::kF32, Layout::kNCHW);
  ASSERT_EQ(got.size(), want.size());
  expect_within_a_level(got, want, im, 0, decoder->name());
}

// Image `i` of `im` again as a progressive JPEG (which the JPEG engines do not take), and
// libjpeg-turbo's decode of it as its reference.
void make_progressive(Images& im, size_t i) {
  RgbImage& d = im.decoded[i];
  tjhandle h = tjInitCompress();
  ASSERT_NE(h, nullptr);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  ASSERT_EQ(
      tjCompress2(h, d.pixels.data(), static_cast<int>(d.width), 0, static_cast<int>(d.height),
                  TJPF_RGB, &out, &size, TJSAMP_420, 90, TJFLAG_ACCURATEDCT | TJFLAG_PROGRESSIVE),
      0);
  im.files[i].assign(out, out + size);
  tjFree(out);
  tjDestroy(h);
  d = decode_jpeg(im.files[i].data(), im.files[i].size(), "progressive");
  im.views[i].data = im.files[i].data();
  im.views[i].size = im.files[i].size();
}

TEST_F(ImageDecoderGpu, BatchesOfChangingSizesQueuedBackToBackEachMatch) {
  Images im;
  make_images(false, im);
  make_progressive(im, 4);
  const std::vector<float> want = cpu_path(im);
  // [first, first + n): 6, 3, 4 and 5 images, with no wait between them.
  const size_t batches[][2] = {{0, 6}, {0, 3}, {2, 4}, {1, 5}};
  std::vector<Tensor> dst;
  Backend::CopyMarks last{};
  for (const auto& b : batches) {
    const std::vector<EncodedImage> views(
        im.views.begin() + static_cast<std::ptrdiff_t>(b[0]),
        im.views.begin() + static_cast<std::ptrdiff_t>(b[0] + b[1]));
    dst.push_back(gpu->empty({static_cast<int64_t>(b[1]), 3, kSize, kSize}, DType::kF32,
                             MemCategory::kActivations, "images"));
    last = decoder->decode(views, {kImageNetMean, kImageNetStd}, dst.back(), gpu->clock().mark());
  }
  gpu->wait_for_input(last.end);
  for (size_t k = 0; k < dst.size(); ++k) {
    std::vector<float> got(static_cast<size_t>(dst[k].numel()));
    gpu->copy_to_host(dst[k], got.data());
    expect_within_a_level(got, want, im, batches[k][0], decoder->name());
  }
  // With JPEG engines, the progressive file's part went to the default backend.
  const std::string name = decoder->name();
  if (name.rfind("nvjpeg hardware", 0) == 0) {
    EXPECT_NE(name.find("default"), std::string::npos) << name;
  }
}

TEST_F(ImageDecoderGpu, AFileWhoseDataDoesNotDecodeIsRefusedByName) {
  Images im;
  make_images(false, im);
  std::vector<uint8_t> broken = im.files[0];
  // Keep the headers, cut the entropy-coded data short and end the file there.
  broken.resize(broken.size() / 3);
  broken.push_back(0xFF);
  broken.push_back(0xD9);
  im.views[0].data = broken.data();
  im.views[0].size = broken.size();
  im.views[0].name = "dir/broken.JPEG";
  Tensor dst = gpu->empty({static_cast<int64_t>(im.views.size()), 3, kSize, kSize}, DType::kF32,
                          MemCategory::kActivations, "images");
  try {
    const Backend::CopyMarks m =
        decoder->decode(im.views, {kImageNetMean, kImageNetStd}, dst, gpu->clock().mark());
    gpu->wait_for_input(m.end);
    gpu->synchronize();
    FAIL() << "a truncated file decoded";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("dir/broken.JPEG"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dlb
