// The JPEG files of make-dataset and the input pipeline (workloads/data/jpeg.h, tar_writer.h,
// make_dataset.h): a round trip through libjpeg-turbo, its DCT scales, a box's decode against the
// whole image's, the bad files it refuses with their names, ustar headers, and a generated data
// set's files.
#include "workloads/data/jpeg.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <turbojpeg.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "runtime/core/error.h"
#include "runtime/core/rng.h"
#include "suites/harness/core/source_dir.h"
#include "workloads/data/augment.h"
#include "workloads/data/make_dataset.h"
#include "workloads/data/tar_writer.h"

namespace dlb {
namespace {

MakeDatasetOptions small_set() {
  MakeDatasetOptions o;
  o.images = 6;
  o.val_images = 3;
  o.classes = 3;
  o.width = 40;
  o.height = 30;
  o.shards = 2;
  return o;
}

std::string error_of(const std::vector<uint8_t>& bytes) {
  try {
    decode_jpeg(bytes.data(), bytes.size(), "photo.JPEG");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A JPEG at quality 95 of a smooth image is close to it: PSNR over 30 dB.
TEST(Jpeg, ARoundTripKeepsTheSizeAndThePicture) {
  MakeDatasetOptions o = small_set();
  o.width = 64;
  o.height = 48;
  const RgbImage img = generated_image(1, 7, o);
  const std::vector<uint8_t> jpeg = encode_jpeg(img, 95);
  const JpegHeader h = read_jpeg_header(jpeg.data(), jpeg.size(), "x");
  EXPECT_EQ(h.width, img.width);
  EXPECT_EQ(h.height, img.height);
  EXPECT_FALSE(h.grayscale);
  const RgbImage back = decode_jpeg(jpeg.data(), jpeg.size(), "x");
  ASSERT_EQ(back.width, img.width);
  ASSERT_EQ(back.height, img.height);
  double squared = 0;
  for (size_t i = 0; i < img.pixels.size(); ++i) {
    const double d = static_cast<double>(img.pixels[i]) - static_cast<double>(back.pixels[i]);
    squared += d * d;
  }
  const double mse = squared / static_cast<double>(img.pixels.size());
  const double psnr = 10 * std::log10(255.0 * 255.0 / mse);
  EXPECT_GT(psnr, 30) << "mean squared error " << mse;
}

// libjpeg-turbo scales in the IDCT: the smallest of 1/8, 1/4, 1/2 and 1 that covers the request.
TEST(Jpeg, DecodesAtTheSmallestDctScaleThatCoversTheRequest) {
  RgbImage img{400, 300, std::vector<uint8_t>(400 * 300 * 3, 128)};
  const std::vector<uint8_t> jpeg = encode_jpeg(img, 90);
  auto size_at = [&](int64_t w, int64_t h) {
    const RgbImage d = decode_jpeg(jpeg.data(), jpeg.size(), "x", w, h);
    EXPECT_EQ(d.pixels.size(), static_cast<size_t>(d.width * d.height * 3));
    return std::make_pair(d.width, d.height);
  };
  EXPECT_EQ(size_at(0, 0), std::make_pair(int64_t{400}, int64_t{300}));
  EXPECT_EQ(size_at(50, 10), std::make_pair(int64_t{50}, int64_t{38}));      // 1/8
  EXPECT_EQ(size_at(100, 75), std::make_pair(int64_t{100}, int64_t{75}));    // 1/4
  EXPECT_EQ(size_at(101, 75), std::make_pair(int64_t{200}, int64_t{150}));   // 1/2, not 3/8
  EXPECT_EQ(size_at(10, 290), std::make_pair(int64_t{400}, int64_t{300}));   // not 7/8 either
  EXPECT_EQ(size_at(4000, 10), std::make_pair(int64_t{400}, int64_t{300}));  // never enlarged
}

TEST(Jpeg, AGrayscaleJpegIsItsChannelInAllThree) {
  std::vector<uint8_t> gray(32 * 16);
  for (size_t i = 0; i < gray.size(); ++i) gray[i] = static_cast<uint8_t>(i % 251);
  tjhandle h = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  ASSERT_EQ(tjCompress2(h, gray.data(), 32, 0, 16, TJPF_GRAY, &out, &size, TJSAMP_GRAY, 90, 0), 0);
  const std::vector<uint8_t> jpeg(out, out + size);
  tjFree(out);
  tjDestroy(h);
  EXPECT_TRUE(read_jpeg_header(jpeg.data(), jpeg.size(), "g").grayscale);
  const RgbImage rgb = decode_jpeg(jpeg.data(), jpeg.size(), "g");
  ASSERT_EQ(rgb.pixels.size(), 32u * 16 * 3);
  for (size_t i = 0; i < 32 * 16; ++i) {
    EXPECT_EQ(rgb.pixels[3 * i], rgb.pixels[3 * i + 1]);
    EXPECT_EQ(rgb.pixels[3 * i], rgb.pixels[3 * i + 2]);
  }
}

TEST(Jpeg, BadFilesAreRefusedWithTheirName) {
  EXPECT_NE(error_of({}).find("photo.JPEG: empty file"), std::string::npos) << error_of({});
  const std::string text = "not a picture at all";
  const std::string not_jpeg = error_of(std::vector<uint8_t>(text.begin(), text.end()));
  EXPECT_NE(not_jpeg.find("photo.JPEG: not a JPEG"), std::string::npos) << not_jpeg;
  const RgbImage img = generated_image(0, 1, small_set());
  MakeDatasetOptions large = small_set();
  large.width = 400;
  large.height = 300;
  std::vector<uint8_t> jpeg = encode_jpeg(generated_image(0, 1, large), 90);
  jpeg.resize(jpeg.size() * 3 / 5);  // the header whole, the scan cut short
  const std::string truncated = error_of(jpeg);
  EXPECT_NE(truncated.find("photo.JPEG: a corrupt or truncated JPEG"), std::string::npos)
      << truncated;
  // A header that claims 60000 x 60000 pixels: refused before anything is allocated.
  std::vector<uint8_t> huge = encode_jpeg(img, 90);
  for (size_t i = 0; i + 8 < huge.size(); ++i) {
    if (huge[i] != 0xFF || huge[i + 1] != 0xC0) continue;  // SOF0: height, then width
    huge[i + 5] = huge[i + 7] = 60000 >> 8;
    huge[i + 6] = huge[i + 8] = 60000 & 0xFF;
    break;
  }
  const std::string too_large = error_of(huge);
  EXPECT_NE(too_large.find("photo.JPEG: a 60000x60000 image is more than"), std::string::npos)
      << too_large;
  // CMYK (PIL writes Adobe's): converted to RGB (augment_test compares it with PIL's), and a
  // truncated one refused as any other.
  std::ifstream in(source_dir() + "/tests/fuzz/corpus/jpeg/cmyk-24x16.jpg", std::ios::binary);
  std::vector<uint8_t> cmyk{std::istreambuf_iterator<char>(in), {}};
  ASSERT_FALSE(cmyk.empty());
  const RgbImage converted = decode_jpeg(cmyk.data(), cmyk.size(), "cmyk.jpg");
  EXPECT_EQ(converted.width, 24);
  EXPECT_EQ(converted.height, 16);
  EXPECT_EQ(converted.pixels.size(), 24u * 16 * 3);
  cmyk.resize(cmyk.size() / 2);
  EXPECT_THROW(decode_jpeg(cmyk.data(), cmyk.size(), "cmyk.jpg"), InvalidArgument);
  // The thread's next file decodes: a failed decode does not spoil its decompressor (after this
  // one, libjpeg-turbo read the next header as 0x0 until the decompressor was made again).
  const std::vector<uint8_t> good = encode_jpeg(img, 90);
  EXPECT_EQ(read_jpeg_header(good.data(), good.size(), "next.JPEG").width, img.width);
  EXPECT_EQ(decode_jpeg(good.data(), good.size(), "next.JPEG").pixels,
            decode_jpeg(good.data(), good.size(), "again.JPEG").pixels);
  EXPECT_THROW(encode_jpeg(RgbImage{2, 2, std::vector<uint8_t>(11)}, 90), InvalidArgument);
  EXPECT_THROW(encode_jpeg(img, 0), InvalidArgument);
}

// A JPEG of a w x h image with structure and noise, in `subsampling`, baseline or progressive.
std::vector<uint8_t> test_jpeg(int w, int h, int subsampling, bool progressive, Rng& rng) {
  std::vector<uint8_t> px(static_cast<size_t>(w * h * 3));
  for (size_t i = 0; i < px.size(); ++i) {
    px[i] = static_cast<uint8_t>((i * 7 + (i / 97) * 13 + rng.below(40)) % 256);
  }
  tjhandle c = tjInitCompress();  // one a file: a handle keeps a progressive file's scans
  unsigned char* out = nullptr;
  unsigned long size = 0;
  const int flags = TJFLAG_ACCURATEDCT | (progressive ? TJFLAG_PROGRESSIVE : 0);
  const int rc = tjCompress2(c, px.data(), w, 0, h, TJPF_RGB, &out, &size, subsampling, 85, flags);
  std::vector<uint8_t> jpeg =
      rc == 0 ? std::vector<uint8_t>(out, out + size) : std::vector<uint8_t>{};
  tjFree(out);
  tjDestroy(c);
  return jpeg;
}

// TurboJPEG's decode of `jpeg` at the DCT scale that gives width x height (accurate IDCT, fancy
// upsampling: PIL's), with a decompressor of its own.
std::vector<uint8_t> turbojpeg_decode(const std::vector<uint8_t>& jpeg, int64_t width,
                                      int64_t height) {
  std::vector<uint8_t> px(static_cast<size_t>(width * height * 3));
  tjhandle d = tjInitDecompress();
  const int rc = tjDecompress2(d, jpeg.data(), jpeg.size(), px.data(), static_cast<int>(width), 0,
                               static_cast<int>(height), TJPF_RGB, TJFLAG_ACCURATEDCT);
  tjDestroy(d);
  return rc == 0 ? px : std::vector<uint8_t>{};
}

// A progressive `jpeg`'s first `scans` scans, then its end: a valid file whose unsent
// coefficients libjpeg's block smoothing estimates from the neighbouring blocks' DC.
std::vector<uint8_t> first_scans(const std::vector<uint8_t>& jpeg, int scans) {
  std::vector<uint8_t> out(jpeg.begin(), jpeg.begin() + 2);  // SOI
  int seen = 0;
  for (size_t i = 2; i + 3 < jpeg.size() && jpeg[i + 1] != 0xD9;) {
    size_t end = i + 2 + (size_t{jpeg[i + 2]} << 8 | jpeg[i + 3]);
    if (jpeg[i + 1] == 0xDA) {  // a scan: its header, then its data up to the next marker
      if (seen++ == scans) break;
      while (end + 1 < jpeg.size() &&
             !(jpeg[end] == 0xFF && jpeg[end + 1] != 0 && (jpeg[end + 1] & 0xF8) != 0xD0)) {
        ++end;
      }
    }
    out.insert(out.end(), jpeg.begin() + static_cast<std::ptrdiff_t>(i),
               jpeg.begin() + static_cast<std::ptrdiff_t>(end));
    i = end;
  }
  out.push_back(0xFF);
  out.push_back(0xD9);
  return out;
}

// decode_jpeg is TurboJPEG's decode (tjDecompress2) bit for bit; decode_jpeg_box's pixels are
// the whole decode's in the box, bit for bit: every chroma subsampling, baseline, progressive,
// and progressive with only its first scans (smoothed), each DCT scale, boxes anywhere (at an
// edge, one pixel wide, the whole image). Without the margin around libjpeg's column crop, 4:2:2
// and 4:2:0 boxes differ from the whole decode in their edge columns, and with one iMCU of it
// instead of three, boxes of the cut progressive files do.
TEST(Jpeg, ABoxDecodesAsTheWholeImageDoesThere) {
  const int subsamplings[] = {TJSAMP_444, TJSAMP_422, TJSAMP_420,
                              TJSAMP_440, TJSAMP_411, TJSAMP_GRAY};
  Rng rng(5);
  int boxes = 0;
  for (int i = 0; i < 108; ++i) {
    const int w = 9 + static_cast<int>(rng.below(300)), h = 9 + static_cast<int>(rng.below(260));
    const int kind = (i / 6) % 3;  // baseline, progressive, progressive cut to its first scans
    std::vector<uint8_t> jpeg = test_jpeg(w, h, subsamplings[i % 6], kind > 0, rng);
    ASSERT_FALSE(jpeg.empty());
    if (kind == 2) jpeg = first_scans(jpeg, 1 + static_cast<int>(rng.below(4)));
    const int64_t denom = int64_t{1} << rng.below(4);  // asked for through the minimum size
    const int64_t min_w = (w + denom - 1) / denom, min_h = (h + denom - 1) / denom;
    const RgbImage whole = decode_jpeg(jpeg.data(), jpeg.size(), "whole", min_w, min_h);
    EXPECT_EQ(whole.pixels, turbojpeg_decode(jpeg, whole.width, whole.height)) << "image " << i;
    for (int k = 0; k < 6; ++k) {
      CropBox box{static_cast<int64_t>(rng.below(static_cast<uint64_t>(h))),
                  static_cast<int64_t>(rng.below(static_cast<uint64_t>(w))), 0, 0};
      box.height = 1 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(h - box.top)));
      box.width = 1 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(w - box.left)));
      if (k == 0) box = {0, 0, h, w};
      const CropBox at = scaled_box(box, w, h, whole.width, whole.height);
      const RgbImage got = decode_jpeg_box(jpeg.data(), jpeg.size(), "box", min_w, min_h, box);
      ASSERT_EQ(got.width, at.width);
      ASSERT_EQ(got.height, at.height);
      EXPECT_EQ(got.pixels, crop(whole, at).pixels)
          << "image " << i << " (" << w << "x" << h << ", 1/" << denom << "), box " << at.left
          << "," << at.top << " " << at.width << "x" << at.height;
      ++boxes;
    }
  }
  EXPECT_EQ(boxes, 108 * 6);
}

// A box reads all of the file's data, as a whole decode does: a file cut short below the box,
// or a box outside the image, is refused by name.
TEST(Jpeg, ABoxOfABadFileIsRefusedAsTheWholeIs) {
  Rng rng(6);
  std::vector<uint8_t> jpeg = test_jpeg(320, 240, TJSAMP_420, false, rng);
  EXPECT_THROW(decode_jpeg_box(jpeg.data(), jpeg.size(), "x", 0, 0, {0, 0, 8, 320 + 1}),
               InvalidArgument);
  jpeg.resize(jpeg.size() * 3 / 5);
  try {
    decode_jpeg_box(jpeg.data(), jpeg.size(), "top.JPEG", 0, 0, {0, 0, 16, 16});
    FAIL() << "a truncated file decoded";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("top.JPEG: a corrupt or truncated JPEG"),
              std::string::npos)
        << e.what();
  }
  // CMYK: converted as a whole decode converts it.
  std::ifstream in(source_dir() + "/tests/fuzz/corpus/jpeg/cmyk-24x16.jpg", std::ios::binary);
  const std::vector<uint8_t> cmyk{std::istreambuf_iterator<char>(in), {}};
  ASSERT_FALSE(cmyk.empty());
  const RgbImage whole = decode_jpeg(cmyk.data(), cmyk.size(), "cmyk.jpg");
  const CropBox box{3, 5, 9, 11};
  EXPECT_EQ(decode_jpeg_box(cmyk.data(), cmyk.size(), "cmyk.jpg", 0, 0, box).pixels,
            crop(whole, box).pixels);
}

// libjpeg keeps the quantization tables it has read in its decompressor: a file without its own
// (an abbreviated stream) decoded with those of the file read before it, when one decompressor
// served a thread's files. Found by the fuzzer as a file refused alone and accepted after
// another. Each decode now has its own: such a file is refused whatever came before.
TEST(Jpeg, AFileWithoutItsTablesIsRefusedWhateverWasDecodedBefore) {
  const RgbImage img = generated_image(0, 1, small_set());
  const std::vector<uint8_t> good = encode_jpeg(img, 90);
  std::vector<uint8_t> no_tables;
  for (size_t i = 0; i < good.size();) {  // every segment but DQT (FF DB), up to the scan
    if (good[i] == 0xFF && good[i + 1] == 0xDB) {
      i += 2 + (size_t{good[i + 2]} << 8 | good[i + 3]);
      continue;
    }
    const bool segment = good[i] == 0xFF && good[i + 1] != 0xD8 && good[i + 1] != 0xDA;
    const size_t n = segment ? 2 + (size_t{good[i + 2]} << 8 | good[i + 3]) : good.size() - i;
    const size_t take = good[i] == 0xFF && good[i + 1] == 0xD8 ? 2 : n;
    no_tables.insert(no_tables.end(), good.begin() + static_cast<std::ptrdiff_t>(i),
                     good.begin() + static_cast<std::ptrdiff_t>(i + take));
    i += take;
  }
  ASSERT_LT(no_tables.size(), good.size());
  EXPECT_THROW(decode_jpeg(no_tables.data(), no_tables.size(), "alone.JPEG"), InvalidArgument);
  EXPECT_EQ(decode_jpeg(good.data(), good.size(), "good.JPEG").width, img.width);
  EXPECT_THROW(decode_jpeg(no_tables.data(), no_tables.size(), "after.JPEG"), InvalidArgument);
  EXPECT_THROW(decode_jpeg_box(no_tables.data(), no_tables.size(), "box.JPEG", 0, 0, {0, 0, 4, 4}),
               InvalidArgument);
}

// POSIX ustar: the name, the size in octal, the magic, and a checksum over the header with its
// own field as spaces.
TEST(Tar, AHeaderIsUstarWithItsChecksum) {
  const std::vector<char> h = tar_header("00000001.jpg", 1000);
  ASSERT_EQ(h.size(), 512u);
  EXPECT_EQ(std::string(h.data()), "00000001.jpg");
  EXPECT_EQ(std::string(&h[124]), "00000001750");  // 1000 in octal, 11 digits
  EXPECT_EQ(std::string(&h[257]), "ustar");
  EXPECT_EQ(h[156], '0');
  std::vector<char> blank = h;
  std::fill(blank.begin() + 148, blank.begin() + 156, ' ');
  unsigned sum = 0;
  for (char c : blank) sum += static_cast<unsigned char>(c);
  EXPECT_EQ(std::stoul(std::string(&h[148], 6), nullptr, 8), sum);
  EXPECT_THROW(tar_header(std::string(101, 'a'), 1), InvalidArgument);
  EXPECT_THROW(tar_header("", 1), InvalidArgument);
}

TEST(MakeDataset, ImagesAreDrawnFromTheSeedAndTheirStreamAlone) {
  const MakeDatasetOptions o = small_set();
  const RgbImage a = generated_image(2, 5, o), b = generated_image(2, 5, o);
  EXPECT_EQ(a.pixels, b.pixels);
  EXPECT_NE(generated_image(2, 6, o).pixels, a.pixels);
  EXPECT_GE(a.width, 24);  // 0.6 to 1.4 times 40 x 30
  EXPECT_LE(a.width, 56);
  EXPECT_GE(a.height, 18);
  EXPECT_LE(a.height, 42);
  EXPECT_EQ(class_name(7, 10), "class_007");
  EXPECT_EQ(class_name(1234, 5000), "class_1234");
  EXPECT_LT(class_name(99, 1000), class_name(100, 1000));  // names sort as labels
}

TEST(MakeDataset, WritesTheFoldersAndTheShards) {
  char tmpl[] = "/tmp/dlb-make-dataset-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::filesystem::path dir(tmpl);
  const DatasetFiles files = write_dataset(dir.string(), small_set());
  EXPECT_EQ(files.train, 6);
  EXPECT_EQ(files.val, 3);
  int jpegs = 0;
  for (const auto& f : std::filesystem::recursive_directory_iterator(dir)) {
    if (f.path().extension() != ".JPEG") continue;
    std::ifstream in(f.path(), std::ios::binary);
    const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), {}};
    EXPECT_NO_THROW(decode_jpeg(bytes.data(), bytes.size(), f.path().string()));
    ++jpegs;
  }
  EXPECT_EQ(jpegs, 9);
  EXPECT_TRUE(std::filesystem::exists(dir / "train/class_002/class_002_train_00000005.JPEG"));
  EXPECT_TRUE(std::filesystem::exists(dir / "val/class_000/class_000_val_00000000.JPEG"));
  // Two shards of three samples: each a header and data per member, and the two end blocks.
  for (const char* shard : {"shards/shard-000000.tar", "shards/shard-000001.tar"}) {
    EXPECT_EQ(std::filesystem::file_size(dir / shard) % 512, 0u) << shard;
    EXPECT_GT(std::filesystem::file_size(dir / shard), 6u * 512 + 1024) << shard;
  }
  std::filesystem::remove_all(dir);
  MakeDatasetOptions bad = small_set();
  bad.images = 2;  // fewer than the classes
  EXPECT_THROW(write_dataset("/nonexistent", bad), InvalidArgument);
}

}  // namespace
}  // namespace dlb
