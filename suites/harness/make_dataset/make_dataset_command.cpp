#include "suites/harness/make_dataset/make_dataset_command.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <system_error>

#include "runtime/core/error.h"

namespace dlb {
namespace {

// "WxH", each a whole number.
std::pair<int64_t, int64_t> parse_size(const std::string& text) {
  const size_t x = text.find('x');
  auto whole = [&](const std::string& s) {
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) {
      throw InvalidArgument(fmt::format("--size={}: expected WxH, such as 400x350", text));
    }
    return std::stoll(s);
  };
  if (x == std::string::npos) whole("");
  return {whole(text.substr(0, x)), whole(text.substr(x + 1))};
}

// `out` may be written: it does not exist, or is an empty folder (removed, to be replaced).
void claim(const std::filesystem::path& out) {
  std::error_code ec;
  const auto status = std::filesystem::symlink_status(out, ec);
  if (!std::filesystem::exists(status)) return;
  if (!std::filesystem::is_directory(status) || !std::filesystem::is_empty(out, ec)) {
    throw InvalidArgument(fmt::format(
        "--out={}: already exists and is not an empty folder; make-dataset writes a new one",
        out.string()));
  }
  std::filesystem::remove(out, ec);
}

}  // namespace

int make_dataset_command(const MakeDatasetCommandOptions& o) {
  MakeDatasetOptions data = o.data;
  std::tie(data.width, data.height) = parse_size(o.size);
  check_make_dataset(data);
  if (o.out.empty()) throw InvalidArgument("--out: a folder to write the data set into");
  const std::filesystem::path out = std::filesystem::absolute(o.out).lexically_normal();
  claim(out);
  const std::filesystem::path partial =
      out.parent_path() / fmt::format(".{}.partial-{}", out.filename().string(), getpid());
  std::filesystem::create_directories(partial);
  const auto began = std::chrono::steady_clock::now();
  DatasetFiles files;
  try {
    files = write_dataset(partial.string(), data);
    std::filesystem::rename(partial, out);
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(partial, ec);
    throw;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  fmt::print(
      "make-dataset: {} training images ({} classes, about {}x{}, JPEG quality {}) in {}/train, "
      "{} in {}/val, {} shard(s) in {}/shards; {:.1f} MB of JPEG in {:.1f} s\n",
      files.train, data.classes, data.width, data.height, data.quality, out.string(), files.val,
      out.string(), files.shards, out.string(), static_cast<double>(files.bytes) / 1e6, s);
  return 0;
}

}  // namespace dlb
