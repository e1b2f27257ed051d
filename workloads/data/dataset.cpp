#include "workloads/data/dataset.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <numeric>

#include "runtime/core/checked.h"
#include "runtime/core/error.h"
#include "runtime/io/text_file.h"

namespace dlb {

void Dataset::gather(const std::vector<int64_t>& indices, float* images_out,
                     int64_t* labels_out) const {
  const int64_t e = image_elems();
  for (size_t i = 0; i < indices.size(); ++i) {
    std::copy_n(images.data() + indices[i] * e, e, images_out + i * e);
    labels_out[i] = labels[indices[i]];
  }
}

std::string default_digits_path() {
  if (const char* env = std::getenv("DLB_DIGITS_PATH")) return env;
  return "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";
}

namespace {
std::string read_gzip(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    throw IoError(
        fmt::format("digits data not found at '{}' (install Debian's python3-sklearn with "
                    "scripts/install-deps.sh, or set DLB_DIGITS_PATH)",
                    path));
  }
  require_regular_file(path, "digits data");  // a FIFO or a device is never opened
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw IoError(fmt::format("cannot open '{}'", path));
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  const bool failed = n < 0;
  gzclose(f);
  if (failed) throw IoError(fmt::format("'{}' is not a readable gzip file", path));
  return out;
}

Dataset subset(const Dataset& all, const std::vector<int64_t>& idx) {
  Dataset d{all.channels, all.height, all.width, all.num_classes, {}, {}};
  d.images.resize(idx.size() * all.image_elems());
  d.labels.resize(idx.size());
  all.gather(idx, d.images.data(), d.labels.data());
  return d;
}
}  // namespace

Dataset parse_digits_csv(std::string_view text, const std::string& source) {
  Dataset d{1, 8, 8, 10, {}, {}};
  int64_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const auto bad = [&](const std::string& why) {
      return InvalidArgument(fmt::format("{}:{}: {}", source, line_no, why));
    };
    std::vector<std::string_view> fields;
    for (size_t start = 0;;) {
      const size_t comma = line.find(',', start);
      fields.push_back(line.substr(start, comma - start));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (fields.size() != 65) {
      throw bad(fmt::format("expected 64 pixels and a label, found {} fields", fields.size()));
    }
    for (size_t k = 0; k < 64; ++k) {
      float v = 0;
      const auto r = std::from_chars(fields[k].data(), fields[k].data() + fields[k].size(), v);
      if (r.ec != std::errc() || r.ptr != fields[k].data() + fields[k].size() || !(v >= 0) ||
          v > 16) {
        throw bad(fmt::format("pixel {} is '{}', not a number in [0, 16]", k, fields[k]));
      }
      d.images.push_back(v / 16.f);
    }
    const std::string_view label = fields[64];
    int64_t l = -1;
    const auto r = std::from_chars(label.data(), label.data() + label.size(), l);
    if (r.ec != std::errc() || r.ptr != label.data() + label.size() || l < 0 || l > 9) {
      throw bad(fmt::format("the label is '{}', not an integer 0-9", label));
    }
    d.labels.push_back(l);
  }
  return d;
}

DigitsSplit load_digits(const std::string& path, int64_t image_size, int64_t channels) {
  if (channels < 1) throw InvalidArgument(fmt::format("channels must be >= 1 (got {})", channels));
  if (image_size < 8 || image_size % 8 != 0) {
    throw InvalidArgument(fmt::format(
        "digits images are 8x8; --image-size must be a multiple of 8 (got {})", image_size));
  }
  const Dataset digits = parse_digits_csv(read_gzip(path), path);
  if (digits.size() < 10) {
    throw InvalidArgument(fmt::format("{}: only {} samples", path, digits.size()));
  }
  const int64_t f = image_size / 8;
  Dataset all{channels, image_size, image_size, 10, {}, digits.labels};
  const char* what = "the digits upsampled to --image-size";
  const int64_t elems = checked_mul(checked_mul(channels, image_size, what), image_size, what);
  all.images.reserve(static_cast<size_t>(checked_mul(all.size(), elems, what)));
  for (int64_t i = 0; i < digits.size(); ++i) {
    const float* v = digits.images.data() + i * 64;
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t y = 0; y < image_size; ++y)
        for (int64_t x = 0; x < image_size; ++x) all.images.push_back(v[(y / f) * 8 + (x / f)]);
  }
  std::vector<int64_t> order(all.size());
  std::iota(order.begin(), order.end(), 0);
  Rng rng(20240601);  // the fixed split
  for (int64_t i = all.size() - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
  const int64_t n_train = all.size() * 4 / 5;
  return {subset(all, {order.begin(), order.begin() + n_train}),
          subset(all, {order.begin() + n_train, order.end()})};
}

Dataset make_synthetic(int64_t batch, int64_t channels, int64_t image_size, int64_t num_classes,
                       uint64_t seed) {
  Dataset d{channels, image_size, image_size, num_classes, {}, {}};
  Rng rng(seed);
  d.images.resize(batch * d.image_elems());
  for (float& v : d.images) v = rng.normal(0.f, 1.f);
  d.labels.resize(batch);
  for (int64_t& l : d.labels) l = rng.below(num_classes);
  return d;
}

}  // namespace dlb
