#include "workloads/data/make_dataset.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <system_error>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/rng.h"
#include "workloads/data/tar_writer.h"

namespace dlb {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr int64_t kMaxImages = int64_t{1} << 24;
constexpr int64_t kMaxSide = 4096;

struct Look {
  double r, g, b;        // the class's colour, 0-1
  double angle, cycles;  // its stripes: orientation, and periods across the shorter side
};

// A hue around the colour wheel per class, stripes turned and spaced per class.
Look class_look(int64_t label, int64_t classes) {
  const double hue = static_cast<double>(label) / static_cast<double>(classes);
  auto channel = [&](double offset) { return 0.5 + 0.35 * std::cos(2 * kPi * (hue - offset)); };
  return {channel(0), channel(1.0 / 3), channel(2.0 / 3),
          kPi * std::fmod(0.618034 * static_cast<double>(label), 1.0),
          2.0 + static_cast<double>((label * 7) % 6)};
}

uint8_t to_byte(double v) { return static_cast<uint8_t>(std::clamp(v, 0.0, 255.0) + 0.5); }

void write_file(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out)
    throw IoError(fmt::format("{}: could not be written (is the disk full?)", path.string()));
}

// `count` images of one split into dir/<split>/<class>/, their JPEGs also handed to `each`.
template <typename Each>
void write_split(const std::filesystem::path& dir, const std::string& split, int64_t count,
                 uint64_t first_stream, const MakeDatasetOptions& o, DatasetFiles& files,
                 Each&& each) {
  for (int64_t label = 0; label < o.classes; ++label) {
    std::filesystem::create_directories(dir / split / class_name(label, o.classes));
  }
  for (int64_t i = 0; i < count; ++i) {
    const int64_t label = i % o.classes;
    const std::string cls = class_name(label, o.classes);
    const std::vector<uint8_t> jpeg =
        encode_jpeg(generated_image(label, first_stream + static_cast<uint64_t>(i), o), o.quality);
    write_file(dir / split / cls / fmt::format("{}_{}_{:08d}.JPEG", cls, split, i), jpeg);
    files.bytes += jpeg.size();
    each(i, label, jpeg);
  }
}

}  // namespace

void check_make_dataset(const MakeDatasetOptions& o) {
  auto check = [](bool ok, const std::string& what) {
    if (!ok) throw InvalidArgument(what);
  };
  check(o.classes >= 1 && o.classes <= 100000, "--classes must be in [1, 100000]");
  check(o.images >= o.classes && o.images <= kMaxImages,
        fmt::format("--images must be in [--classes, {}]: every class needs a training image",
                    kMaxImages));
  check(o.val_images >= 0 && o.val_images <= kMaxImages,
        fmt::format("--val-images must be in [0, {}]", kMaxImages));
  check(o.width >= 8 && o.height >= 8 && o.width <= kMaxSide && o.height <= kMaxSide,
        fmt::format("--size must be WxH with each side in [8, {}]", kMaxSide));
  check(o.shards >= 0 && o.shards <= o.images, "--shards must be in [0, --images]");
  check(o.quality >= 1 && o.quality <= 100, "--quality must be in [1, 100]");
}

std::string class_name(int64_t label, int64_t classes) {
  const auto digits = std::max<size_t>(3, std::to_string(std::max<int64_t>(classes - 1, 0)).size());
  return fmt::format("class_{:0{}d}", label, digits);
}

RgbImage generated_image(int64_t label, uint64_t stream, const MakeDatasetOptions& o) {
  Rng rng = Rng(o.seed).fork(stream);
  const Look look = class_look(label, o.classes);
  RgbImage img;
  img.width =
      std::max<int64_t>(8, std::lround(static_cast<double>(o.width) * rng.uniform(0.6f, 1.4f)));
  img.height =
      std::max<int64_t>(8, std::lround(static_cast<double>(o.height) * rng.uniform(0.6f, 1.4f)));
  const double phase = 2 * kPi * rng.uniform(), brightness = rng.uniform(0.8f, 1.2f);
  const double period = static_cast<double>(std::min(img.width, img.height)) / look.cycles;
  const double cx = std::cos(look.angle) / period, cy = std::sin(look.angle) / period;
  img.pixels.resize(static_cast<size_t>(img.width * img.height * 3));
  uint8_t* p = img.pixels.data();
  for (int64_t y = 0; y < img.height; ++y) {
    for (int64_t x = 0; x < img.width; ++x) {
      const double s =
          0.5 +
          0.5 * std::sin(2 * kPi * (static_cast<double>(x) * cx + static_cast<double>(y) * cy) +
                         phase);
      const double shade = 255 * brightness * (0.45 + 0.55 * s);
      const double noise = rng.normal(0.f, 6.f);
      *p++ = to_byte(shade * look.r + noise);
      *p++ = to_byte(shade * look.g + noise);
      *p++ = to_byte(shade * look.b + noise);
    }
  }
  return img;
}

DatasetFiles write_dataset(const std::string& dir, const MakeDatasetOptions& o) {
  check_make_dataset(o);
  const std::filesystem::path root(dir);
  DatasetFiles files;
  if (o.shards > 0) std::filesystem::create_directories(root / "shards");
  // Shard s holds training images [s N / S, (s + 1) N / S): one open at a time.
  std::optional<TarWriter> shard;
  int64_t open_shard = -1;
  write_split(root, "train", o.images, 0, o, files,
              [&](int64_t i, int64_t label, const std::vector<uint8_t>& jpeg) {
                if (o.shards == 0) return;
                const int64_t s = i * o.shards / o.images;
                if (s != open_shard) {
                  if (shard) shard->finish();
                  shard.emplace((root / "shards" / fmt::format("shard-{:06d}.tar", s)).string());
                  open_shard = s;
                }
                const std::string key = fmt::format("{:08d}", i);
                shard->add(key + ".jpg", jpeg);
                const std::string cls = std::to_string(label);
                shard->add(key + ".cls", std::vector<uint8_t>(cls.begin(), cls.end()));
              });
  if (shard) shard->finish();
  write_split(root, "val", o.val_images, static_cast<uint64_t>(o.images), o, files,
              [](int64_t, int64_t, const std::vector<uint8_t>&) {});
  files.train = o.images;
  files.val = o.val_images;
  files.shards = o.shards;
  return files;
}

namespace {

// `out` may be written: it does not exist, or is an empty folder (removed, to be replaced).
void claim(const std::filesystem::path& out, const std::string& flag) {
  std::error_code ec;
  const auto status = std::filesystem::symlink_status(out, ec);
  if (!std::filesystem::exists(status)) return;
  if (!std::filesystem::is_directory(status) || !std::filesystem::is_empty(out, ec)) {
    throw InvalidArgument(fmt::format(
        "{}={}: already exists and is not an empty folder; make-dataset writes a new one", flag,
        out.string()));
  }
  std::filesystem::remove(out, ec);
}

}  // namespace

DatasetFiles write_dataset_atomically(const std::string& out_text, const MakeDatasetOptions& o,
                                      const std::string& flag) {
  check_make_dataset(o);
  if (out_text.empty()) throw InvalidArgument(flag + ": a folder to write the data set into");
  const std::filesystem::path out = std::filesystem::absolute(out_text).lexically_normal();
  claim(out, flag);
  const std::filesystem::path partial =
      out.parent_path() / fmt::format(".{}.partial-{}", out.filename().string(), getpid());
  std::filesystem::create_directories(partial);
  try {
    const DatasetFiles files = write_dataset(partial.string(), o);
    std::filesystem::rename(partial, out);
    return files;
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(partial, ec);
    throw;
  }
}

std::pair<int64_t, int64_t> parse_image_size(const std::string& text, const std::string& flag) {
  const size_t x = text.find('x');
  auto whole = [&](const std::string& s) {
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) {
      throw InvalidArgument(fmt::format("{}={}: expected WxH, such as 400x350", flag, text));
    }
    return std::stoll(s);
  };
  if (x == std::string::npos) whole("");
  return {whole(text.substr(0, x)), whole(text.substr(x + 1))};
}

}  // namespace dlb
