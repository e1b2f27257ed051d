// The input pipeline's transforms (workloads/data/augment.h) against PIL and torchvision:
// tests/unit/fixtures/pil/make_fixtures.py wrote PIL's decode of a JPEG and torchvision's crops,
// resizes, flip and evaluation transform of it; dlbench's must be the same bytes. And
// RandomResizedCrop's rule, drawn many times: boxes inside the image, of its areas and ratios.
#include "workloads/data/augment.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <string>

#include "runtime/core/error.h"
#include "runtime/core/rng.h"
#include "suites/harness/core/source_dir.h"
#include "workloads/data/resample_loops.h"

namespace dlb {
namespace {

std::vector<uint8_t> fixture(const std::string& name) {
  std::ifstream in(source_dir() + "/tests/unit/fixtures/pil/" + name, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

RgbImage photo() {
  const std::vector<uint8_t> jpeg = fixture("photo.jpg");
  return decode_jpeg(jpeg.data(), jpeg.size(), "photo.jpg");
}

// Bytes that differ, and by how much at most.
std::string compare(const RgbImage& got, const std::string& name, int64_t w, int64_t h) {
  const std::vector<uint8_t> want = fixture(name);
  if (got.width != w || got.height != h || got.pixels.size() != want.size()) {
    return name + ": size differs";
  }
  int64_t differ = 0, worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const int64_t d = std::abs(int64_t{got.pixels[i]} - int64_t{want[i]});
    differ += d != 0;
    worst = std::max(worst, d);
  }
  return differ == 0 ? ""
                     : name + ": " + std::to_string(differ) + " bytes differ, by up to " +
                           std::to_string(worst);
}

TEST(Augment, DecodesAsPilDoes) { EXPECT_EQ(compare(photo(), "photo.rgb", 63, 47), ""); }

// A CMYK JPEG with black in it (Adobe's inverted values, as PIL writes them): PIL's
// convert("RGB") of its decode, byte for byte.
TEST(Augment, ConvertsACmykJpegAsPilDoes) {
  const std::vector<uint8_t> jpeg = fixture("cmyk.jpg");
  EXPECT_TRUE(read_jpeg_header(jpeg.data(), jpeg.size(), "cmyk.jpg").cmyk);
  EXPECT_EQ(compare(decode_jpeg(jpeg.data(), jpeg.size(), "cmyk.jpg"), "cmyk.rgb", 63, 47), "");
  const RgbImage half = decode_jpeg(jpeg.data(), jpeg.size(), "cmyk.jpg", 30, 20);
  EXPECT_EQ(half.width, 32);  // a DCT scale of 1/2, as for RGB
  EXPECT_EQ(half.height, 24);
}

TEST(Augment, CropsResizesAndFlipsAsTorchvisionDoes) {
  const RgbImage img = photo();
  EXPECT_EQ(compare(resized_crop(img, {5, 7, 30, 41}, 24, 24), "crop_a.rgb", 24, 24), "");
  EXPECT_EQ(compare(resized_crop(img, {0, 0, 47, 63}, 80, 60), "crop_b.rgb", 80, 60), "");
  RgbImage flipped = resized_crop(img, {10, 3, 20, 50}, 32, 16);
  flip_horizontally(flipped);
  EXPECT_EQ(compare(flipped, "crop_c.rgb", 32, 16), "");
  EXPECT_EQ(compare(resized_crop(img, {1, 2, 45, 60}, 10, 7), "crop_d.rgb", 10, 7), "");
  EXPECT_EQ(compare(eval_transform(img, 32), "eval.rgb", 32, 32), "");
  EXPECT_THROW(resized_crop(img, {40, 0, 8, 10}, 4, 4), InvalidArgument);  // past the bottom
}

// PIL crops, then resizes the crop: no tap reads outside the box. The loader decodes only the
// box (decode_jpeg_box) on that ground.
TEST(Augment, AResizedCropReadsNothingOutsideItsBox) {
  const RgbImage img = photo();
  for (const CropBox& box : {CropBox{5, 7, 30, 41}, CropBox{0, 0, 47, 63}, CropBox{46, 62, 1, 1},
                             CropBox{1, 2, 45, 60}}) {
    RgbImage poisoned = img;  // everything outside the box 0 or 255
    for (int64_t y = 0; y < img.height; ++y) {
      for (int64_t x = 0; x < img.width; ++x) {
        const bool inside =
            y >= box.top && y < box.top + box.height && x >= box.left && x < box.left + box.width;
        for (int64_t c = 0; !inside && c < 3; ++c) {
          poisoned.pixels[static_cast<size_t>((y * img.width + x) * 3 + c)] = (x + y) % 2 ? 255 : 0;
        }
      }
    }
    for (const auto& out : {std::pair<int64_t, int64_t>{24, 24}, {80, 60}, {3, 5}}) {
      const RgbImage want = resized_crop(img, box, out.first, out.second);
      EXPECT_EQ(resized_crop(poisoned, box, out.first, out.second).pixels, want.pixels);
      EXPECT_EQ(
          resized_crop(crop(img, box), {0, 0, box.height, box.width}, out.first, out.second).pixels,
          want.pixels);
    }
  }
}

// One resize case: `rows` rows of `in_w` pixels, from row `first_row`, a box of `box_w` from
// column `left` resized across to `out_w`, and down to `out_h`.
struct ResizeCase {
  int64_t in_w, rows, first_row, box_w, left, out_w, out_h;
};

// `a` and `b` give the same bytes on `c`, each pass, on random pixels.
void expect_same_bytes(const ResampleLoops& a, const ResampleLoops& b, const ResizeCase& c,
                       Rng& rng) {
  std::vector<uint8_t> in(static_cast<size_t>(c.in_w * (c.first_row + c.rows) * 3));
  for (uint8_t& v : in) v = static_cast<uint8_t>(rng.below(256));
  const ResampleTaps across = resample_taps(c.box_w, c.out_w);
  std::vector<uint8_t> x(static_cast<size_t>(c.out_w * c.rows * 3)), y(x.size());
  a.rows(in.data() + c.left * 3, c.in_w, c.first_row, c.rows, x.data(), c.out_w, across);
  b.rows(in.data() + c.left * 3, c.in_w, c.first_row, c.rows, y.data(), c.out_w, across);
  EXPECT_EQ(x, y) << "rows: " << c.rows << " of " << c.in_w << " from " << c.first_row << ", box "
                  << c.box_w << " at " << c.left << " to " << c.out_w;
  const ResampleTaps down = resample_taps(c.rows, c.out_h);
  std::vector<uint8_t> u(static_cast<size_t>(c.in_w * c.out_h * 3)), v(u.size());
  const uint8_t* from = in.data() + c.first_row * c.in_w * 3;
  a.columns(from, c.in_w, u.data(), c.out_h, down);
  b.columns(from, c.in_w, v.data(), c.out_h, down);
  EXPECT_EQ(u, v) << "columns: " << c.rows << " rows to " << c.out_h;
}

// The cases: edges (one row, one pixel out, a box one pixel wide, 4000 pixels to 1, 1 to 600, a
// first row past 0), then random ones.
std::vector<ResizeCase> resize_cases() {
  std::vector<ResizeCase> cases = {{5, 1, 0, 5, 0, 3, 1},       {7, 4, 2, 7, 0, 1, 1},
                                   {9, 3, 1, 1, 4, 6, 5},       {4000, 2, 0, 4000, 0, 1, 1},
                                   {1, 600, 0, 1, 0, 600, 600}, {300, 50, 7, 120, 33, 224, 17}};
  Rng rng(12);
  for (int trial = 0; trial < 60; ++trial) {
    ResizeCase c{};
    c.in_w = 1 + static_cast<int64_t>(rng.below(300));
    c.rows = 1 + static_cast<int64_t>(rng.below(200));
    c.first_row = static_cast<int64_t>(rng.below(4));
    c.box_w = 1 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(c.in_w)));
    c.left = static_cast<int64_t>(rng.below(static_cast<uint64_t>(c.in_w - c.box_w + 1)));
    c.out_w = 1 + static_cast<int64_t>(rng.below(trial % 3 == 0 ? 600 : 224));
    c.out_h = 1 + static_cast<int64_t>(rng.below(300));
    cases.push_back(c);
  }
  return cases;
}

// The horizontal pass along the rows and over their transpose give the same bytes (both compiled
// for x86-64, so on any host); and the loops compiled for AVX-512, which take the transpose, the
// same bytes as the x86-64 copy, where the CPU has AVX-512.
TEST(Augment, TheResizeLoopsGiveTheSameBytesInEveryCopy) {
  const ResampleLoops& plain = resample_loops(CpuIsa::kX86_64);
  const bool avx512 = host_cpu_isa() == CpuIsa::kAvx512;
  Rng rng(13);
  for (const ResizeCase& c : resize_cases()) {
    expect_same_bytes(plain, resample_loops_transposed_x86_64(), c, rng);
    if (avx512) expect_same_bytes(plain, resample_loops(CpuIsa::kAvx512), c, rng);
  }
  if (!avx512) GTEST_SKIP() << "compared along and across the rows; this CPU has no AVX-512";
}

TEST(Augment, RandomResizedCropBoxesFollowTorchvisionsRule) {
  Rng rng(11);
  int fallbacks = 0;
  for (int i = 0; i < 2000; ++i) {
    const int64_t w = 8 + rng.below(600), h = 8 + rng.below(600);
    const CropBox b = random_resized_crop_box(w, h, rng);
    ASSERT_GE(b.top, 0);
    ASSERT_GE(b.left, 0);
    ASSERT_GE(b.height, 1);
    ASSERT_GE(b.width, 1);
    ASSERT_LE(b.top + b.height, h);
    ASSERT_LE(b.left + b.width, w);
    // A drawn box: its sides round sqrt(target x aspect) and sqrt(target / aspect), with the
    // target at least 8% of the area and the aspect within [3/4, 4/3], so the sides before
    // rounding, within half a pixel of these, bound them.
    const double bw = static_cast<double>(b.width), bh = static_cast<double>(b.height);
    const bool drawn = (bw + 0.5) * (bh + 0.5) >= 0.08 * static_cast<double>(w * h) &&
                       (bw + 0.5) / std::max(bh - 0.5, 0.5) >= 0.75 &&
                       (bw - 0.5) / (bh + 0.5) <= 4.0 / 3;
    if (drawn) continue;
    // Otherwise the fallback: a centred box with a whole side.
    EXPECT_TRUE(b.width == w || b.height == h) << w << "x" << h;
    EXPECT_EQ(b.top, (h - b.height) / 2);
    EXPECT_EQ(b.left, (w - b.width) / 2);
    ++fallbacks;
  }
  EXPECT_LT(fallbacks, 200);
  // A 1000x10 strip fits no box of ratio <= 4/3 with a twelfth of its area: the centre crop
  // of ratio 4/3, 13x10.
  Rng again(1);
  EXPECT_EQ(random_resized_crop_box(1000, 10, again), (CropBox{0, 493, 10, 13}));
}

TEST(Augment, NormalizesAsToTensorThenNormalize) {
  RgbImage img{2, 1, {0, 128, 255, 10, 20, 30}};
  std::vector<float> out(6);
  normalize_to_planes(img, out.data());
  EXPECT_EQ(out[0], (0.f / 255.f - 0.485f) / 0.229f);   // R of pixel 0
  EXPECT_EQ(out[1], (10.f / 255.f - 0.485f) / 0.229f);  // R of pixel 1
  EXPECT_EQ(out[2], (128.f / 255.f - 0.456f) / 0.224f);
  EXPECT_EQ(out[5], (30.f / 255.f - 0.406f) / 0.225f);
}

}  // namespace
}  // namespace dlb
