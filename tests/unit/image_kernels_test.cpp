// --decode=gpu's arithmetic on the host (runtime/backend/cuda/image_kernels.h): the two kernels'
// functors, run over every index as the GPU runs them, on images libjpeg-turbo decoded, give the
// CPU path's bytes and floats exactly (workloads/data/augment.h: PIL's resize, the flip,
// ToTensor and Normalize), in f32 NCHW and in the 16-bit channels-last inputs of a mixed run;
// and an encoded loader's batches (the files, their boxes and flips), decoded so, are the CPU
// loader's batches without DCT scaling, at any thread count. Only nvJPEG's decode itself is left
// to a GPU (docs/cuda.md).
#include "runtime/backend/cuda/image_kernels.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "runtime/core/clock.h"
#include "runtime/core/error.h"
#include "runtime/core/half.h"
#include "runtime/core/rng.h"
#include "runtime/train/trainer.h"
#include "workloads/data/augment.h"
#include "workloads/data/image_loader.h"
#include "workloads/data/jpeg.h"
#include "workloads/data/make_dataset.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

using cuda::ImageBatchPlan;
using cuda::ImageJob;

// A decoded image with some structure (gradients and noise), and its JPEG round trip.
RgbImage test_image(int64_t w, int64_t h, uint64_t seed) {
  Rng rng(seed);
  RgbImage img{w, h, std::vector<uint8_t>(static_cast<size_t>(w * h * 3))};
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int64_t c = 0; c < 3; ++c) {
        const auto v = (x * (c + 1) * 7 + y * (3 - c) * 5) % 256 + rng.below(40);
        img.pixels[static_cast<size_t>((y * w + x) * 3 + c)] = static_cast<uint8_t>(v % 256);
      }
    }
  }
  const std::vector<uint8_t> jpeg = encode_jpeg(img, 90);
  return decode_jpeg(jpeg.data(), jpeg.size(), "test image");
}

// What the GPU computes from decoded `images` (each with its box and flip) into an [N, 3, S, S]
// tensor of T in `layout`: both functors over every index, as the kernels' loops visit them.
template <typename T>
std::vector<T> run_kernels(const std::vector<RgbImage>& images,
                           const std::vector<EncodedImage>& encoded, int64_t size,
                           bool channels_last) {
  const ImageBatchPlan plan = cuda::plan_image_batch(encoded, size);
  std::vector<uint8_t> pixels(static_cast<size_t>(plan.pixel_bytes));
  for (size_t i = 0; i < images.size(); ++i) {
    std::memcpy(pixels.data() + plan.jobs[i].pixels, images[i].pixels.data(),
                images[i].pixels.size());
  }
  std::vector<uint8_t> wide(static_cast<size_t>(plan.wide_bytes));
  const auto n = static_cast<int64_t>(plan.jobs.size());
  const cuda::ResizeRows rows{pixels.data(), plan.jobs.data(), n,
                              size,          plan.taps.data(), wide.data()};
  for (int64_t i = 0; i < plan.wide_bytes; ++i) rows(i);
  std::vector<T> out(static_cast<size_t>(n * 3 * size * size));
  cuda::ResizeColumnsNormalize<T> cols{
      wide.data(), plan.jobs.data(), plan.taps.data(), {3, size, size, channels_last}, {},
      {},          out.data()};
  for (int c = 0; c < 3; ++c) {
    cols.mean[c] = kImageNetMean[static_cast<size_t>(c)];
    cols.std[c] = kImageNetStd[static_cast<size_t>(c)];
  }
  for (int64_t o = 0; o < static_cast<int64_t>(out.size()); ++o) cols(o);
  return out;
}

// The CPU path's floats for the same images (NCHW), as the loader makes them.
std::vector<float> cpu_batch(const std::vector<RgbImage>& images,
                             const std::vector<EncodedImage>& encoded, int64_t size) {
  std::vector<float> out(images.size() * static_cast<size_t>(3 * size * size));
  for (size_t i = 0; i < images.size(); ++i) {
    const EncodedImage& e = encoded[i];
    RgbImage img = resized_crop(images[i], {e.top, e.left, e.crop_h, e.crop_w}, size, size);
    if (e.flip) flip_horizontally(img);
    normalize_to_planes(img, out.data() + i * static_cast<size_t>(3 * size * size));
  }
  return out;
}

// A batch of images of assorted sizes, each with a random crop box (shrinking and enlarging) and
// flip, plus a whole-image box and a 1x1 box.
struct Batch {
  std::vector<RgbImage> images;
  std::vector<EncodedImage> encoded;
};
Batch assorted_batch() {
  Batch b;
  const int64_t sizes[][2] = {{400, 350}, {37, 53}, {120, 90}, {23, 23}, {640, 480}, {31, 200}};
  Rng rng(5);
  for (size_t i = 0; i < 8; ++i) {
    const int64_t w = sizes[i % 6][0], h = sizes[i % 6][1];
    b.images.push_back(test_image(w, h, i));
    CropBox box = random_resized_crop_box(w, h, rng);
    if (i == 6) box = {0, 0, h, w};
    if (i == 7) box = {h / 2, w / 3, 1, 1};
    const RgbImage& img = b.images.back();
    b.encoded.push_back({img.pixels.data(), img.pixels.size(), true, w, h, box.top, box.left,
                         box.height, box.width, rng.uniform() < 0.5f, "image"});
  }
  return b;
}

TEST(ImageKernels, F32NchwIsTheCpuPathBitForBit) {
  const Batch b = assorted_batch();
  for (int64_t size : {16, 32, 61}) {
    const std::vector<float> gpu = run_kernels<float>(b.images, b.encoded, size, false);
    const std::vector<float> cpu = cpu_batch(b.images, b.encoded, size);
    ASSERT_EQ(gpu.size(), cpu.size());
    EXPECT_EQ(std::memcmp(gpu.data(), cpu.data(), cpu.size() * sizeof(float)), 0) << size;
  }
}

// A 16-bit input is the CPU's floats rounded to nearest even (InputSlots' floats_to_dtype), and a
// channels-last one holds them in NHWC order.
template <typename T>
void expect_16bit_is_cpu_rounded(DType dtype, bool channels_last) {
  const Batch b = assorted_batch();
  const int64_t size = 24, n = static_cast<int64_t>(b.images.size());
  const std::vector<T> gpu = run_kernels<T>(b.images, b.encoded, size, channels_last);
  const std::vector<float> cpu = cpu_batch(b.images, b.encoded, size);
  std::vector<T> rounded(cpu.size());
  floats_to_dtype(cpu.data(), static_cast<int64_t>(cpu.size()), dtype, rounded.data());
  const cuda::Nchw layout{3, size, size, channels_last};
  for (int64_t o = 0; o < n * 3 * size * size; ++o) {
    int64_t i, c, y, x;
    layout.coords(o, i, c, y, x);
    const size_t nchw = static_cast<size_t>(((i * 3 + c) * size + y) * size + x);
    ASSERT_EQ(std::memcmp(&gpu[static_cast<size_t>(o)], &rounded[nchw], sizeof(T)), 0)
        << "image " << i << " channel " << c << " at " << y << "," << x;
  }
}

TEST(ImageKernels, Bf16ChannelsLastIsTheCpuPathRounded) {
  expect_16bit_is_cpu_rounded<BF16>(DType::kBF16, true);
}

TEST(ImageKernels, Fp16NchwIsTheCpuPathRounded) {
  expect_16bit_is_cpu_rounded<F16>(DType::kF16, false);
}

TEST(ImageKernels, AJobIsFoundByItsOffset) {
  std::vector<ImageJob> jobs(4);
  jobs[0].wide = 0;
  jobs[1].wide = 30;
  jobs[2].wide = 31;
  jobs[3].wide = 90;
  const int64_t want[][2] = {{0, 0}, {29, 0}, {30, 1}, {31, 2}, {89, 2}, {90, 3}, {500, 3}};
  for (const auto& w : want) EXPECT_EQ(cuda::job_at(jobs.data(), 4, w[0]), w[1]) << w[0];
  EXPECT_EQ(cuda::job_at(jobs.data(), 1, 7), 0);
}

TEST(ImageKernels, APlanRefusesABoxOutsideItsImageByName) {
  std::vector<uint8_t> px(10 * 8 * 3);
  std::vector<EncodedImage> images{{px.data(), px.size(), true, 10, 8, 0, 0, 8, 10, false, "ok"}};
  EXPECT_NO_THROW(cuda::plan_image_batch(images, 4));
  images.push_back({px.data(), px.size(), true, 10, 8, 1, 0, 8, 10, false, "dir/bad.JPEG"});
  try {
    cuda::plan_image_batch(images, 4);
    FAIL() << "a box past the image's bottom edge was planned";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("dir/bad.JPEG: crop (1, 0, 8, 10) of a 10x8 image"),
              std::string::npos)
        << e.what();
  }
  images.back() = {px.data(), px.size() - 1, true, 10, 8, 0, 0, 8, 10, false, "short"};
  EXPECT_THROW(cuda::plan_image_batch(images, 4), InvalidArgument);
  // Each decoded image starts at a 256-byte boundary (nvJPEG's output planes).
  images.pop_back();
  images.push_back(images.front());
  const ImageBatchPlan plan = cuda::plan_image_batch(images, 4);
  EXPECT_EQ(plan.jobs[1].pixels, 256);
  EXPECT_EQ(plan.pixel_bytes, 512);
}

class EncodedLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dlb-encoded-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    MakeDatasetOptions o;
    o.images = 20;
    o.val_images = 0;
    o.classes = 4;
    o.width = 60;
    o.height = 44;
    o.shards = 0;
    write_dataset(dir_.string(), o);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

// The device path's batches, decoded on the host by libjpeg-turbo (whole, as nvJPEG decodes)
// and the kernels' functors, are the CPU loader's batches without DCT scaling: the same files,
// boxes, flips and labels, and the same arithmetic after the decode.
TEST_F(EncodedLoaderTest, ItsBatchesDecodedAreTheCpuLoadersWithoutDctScaling) {
  const ImageFolderIndex index = scan_image_folder((dir_ / "train").string());
  ImageLoaderOptions cpu;
  cpu.batch = 4;
  cpu.image_size = 20;
  cpu.seed = 3;
  cpu.dct_scaling = false;
  ImageLoaderOptions dev = cpu;
  dev.encoded = true;
  dev.threads = 2;
  ImageLoader host(index.samples, cpu), encoded(index.samples, dev);
  for (int64_t step = 0; step < 2 * host.steps_per_epoch(); ++step) {
    const ImageLoader::Batch& want = host.next();
    const ImageLoader::Batch& got = encoded.next();
    ASSERT_TRUE(got.images.empty());
    ASSERT_EQ(got.labels, want.labels);
    std::vector<RgbImage> images;
    for (const EncodedSample& e : got.encoded) {
      ASSERT_FALSE(e.decoded);
      images.push_back(decode_jpeg(e.bytes.data(), e.bytes.size(), e.name));
    }
    const std::vector<EncodedImage> views = encoded_images(got.encoded);
    const std::vector<float> decoded = run_kernels<float>(images, views, cpu.image_size, false);
    ASSERT_EQ(decoded.size(), want.images.size());
    EXPECT_EQ(std::memcmp(decoded.data(), want.images.data(), decoded.size() * sizeof(float)), 0)
        << "step " << step;
  }
}

// A decoder on the host, as the GPU's would be with libjpeg-turbo for nvJPEG: each file decoded
// whole, then the kernels' functors into the (CPU) input tensor. Counts what it is given.
class HostDecoder final : public ImageDecoder {
 public:
  explicit HostDecoder(const Clock& clock) : clock_(clock) {}
  std::string name() const override { return "host"; }
  Backend::CopyMarks decode(const std::vector<EncodedImage>& images, const ImageNormalization& norm,
                            Tensor& dst, const Mark&) override {
    const Mark start = clock_.mark();
    std::vector<RgbImage> decoded;
    for (const EncodedImage& im : images) {
      decoded.push_back(decode_jpeg(im.data, im.size, std::string(im.name)));
    }
    EXPECT_EQ(norm.mean, kImageNetMean);
    const std::vector<float> out = run_kernels<float>(decoded, images, dst.shape()[2], false);
    EXPECT_EQ(out.size() * sizeof(float), dst.bytes());
    std::memcpy(dst.raw(), out.data(), dst.bytes());
    ++batches;
    return {start, clock_.mark()};
  }
  int64_t batches = 0;

 private:
  const Clock& clock_;
};

// The trainer's path for files (Trainer::load_encoded_batch, InputSlots::load_encoded) on the
// CPU with the host decoder: the same losses, bit for bit, as training on the CPU loader's
// batches without DCT scaling; the decoded batches counted and their time summed.
TEST_F(EncodedLoaderTest, TrainingOnEncodedBatchesIsTrainingOnTheCpuLoadersBatches) {
  const ImageFolderIndex index = scan_image_folder((dir_ / "train").string());
  ImageLoaderOptions cpu;
  cpu.batch = 4;
  cpu.image_size = 32;
  cpu.seed = 5;
  cpu.dct_scaling = false;
  ImageLoaderOptions dev = cpu;
  dev.encoded = true;
  std::vector<std::vector<float>> losses;
  for (bool encoded : {false, true}) {
    auto backend = make_backend(BackendKind::kCpu, {});
    Graph g = build_model("resnet18", ModelConfig{4, 32, 4, {}});
    Rng rng(7);
    g.declare_for(*backend);
    TrainConfig c;
    c.sgd = SgdConfig{0.01f, 0.9f, 0.f};
    Trainer t(*backend, g, c, rng);
    auto decoder = std::make_unique<HostDecoder>(backend->clock());
    HostDecoder* host = decoder.get();
    t.set_image_decoder(std::move(decoder));
    ImageLoader loader(index.samples, encoded ? dev : cpu);
    const RunStats s = t.run(0, 6, [&](int64_t, int64_t) {
      const ImageLoader::Batch& b = loader.next();
      if (encoded) {
        t.load_encoded_batch(encoded_images(b.encoded), {kImageNetMean, kImageNetStd},
                             b.labels.data());
      } else {
        t.load_batch(b.images.data(), b.labels.data());
      }
    });
    losses.push_back(s.losses);
    EXPECT_EQ(host->batches, encoded ? 6 : 0);
    EXPECT_EQ(t.decoded_batches(), encoded ? 6 : 0);
    EXPECT_EQ(t.decode_seconds() > 0, encoded);
    EXPECT_EQ(t.image_decoder(), "host");
  }
  ASSERT_EQ(losses[0].size(), 6u);
  EXPECT_EQ(losses[0], losses[1]);
}

}  // namespace
}  // namespace dlb
