#include "workloads/data/image_folder.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

#include "runtime/core/error.h"

namespace fs = std::filesystem;

namespace dlb {
namespace {

// torchvision's IMG_EXTENSIONS.
constexpr std::array<const char*, 9> kExtensions = {".jpg", ".jpeg", ".png",  ".ppm", ".bmp",
                                                    ".pgm", ".tif",  ".tiff", ".webp"};

bool is_image_name(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return std::any_of(kExtensions.begin(), kExtensions.end(), [&](const char* ext) {
    const std::string e(ext);
    return lower.size() > e.size() && lower.compare(lower.size() - e.size(), e.size(), e) == 0;
  });
}

// The folder's entries (following links), sorted by name: (name, is a folder).
std::vector<std::pair<std::string, bool>> sorted_entries(const fs::path& dir) {
  std::vector<std::pair<std::string, bool>> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    out.emplace_back(it->path().filename().string(), it->is_directory(type_ec));
  }
  std::sort(out.begin(), out.end());
  return out;
}

using Visited = std::set<std::pair<dev_t, ino_t>>;

// The folder's images, walked in sorted order, into `samples` with `label`. A folder already
// visited on this path (a link loop) is noted and skipped.
void walk(const fs::path& dir, int64_t label, Visited& visited, ImageFolderIndex& index) {
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) return;
  if (!visited.insert({st.st_dev, st.st_ino}).second) {
    index.notes.push_back(
        fmt::format("{}: a symbolic-link loop, not followed again", dir.string()));
    return;
  }
  std::vector<fs::path> folders;
  for (const auto& [name, folder] : sorted_entries(dir)) {
    if (folder) {
      folders.push_back(dir / name);
    } else if (is_image_name(name)) {
      index.samples.push_back({(dir / name).string(), label});
    }
  }
  for (const fs::path& f : folders) walk(f, label, visited, index);
  visited.erase({st.st_dev, st.st_ino});
}

}  // namespace

ImageFolderIndex scan_image_folder(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    throw InvalidArgument(
        fmt::format("{}: not a folder (ImageNet's layout: <class>/<image>)", root));
  }
  ImageFolderIndex index;
  index.root = root;
  for (const auto& [name, folder] : sorted_entries(root)) {
    if (folder) index.classes.push_back(name);
  }
  if (index.classes.empty()) {
    throw InvalidArgument(
        fmt::format("{}: no class folders (ImageNet's layout: <class>/<image>)", root));
  }
  for (size_t label = 0; label < index.classes.size(); ++label) {
    const size_t before = index.samples.size();
    Visited visited;
    walk(fs::path(root) / index.classes[label], static_cast<int64_t>(label), visited, index);
    if (index.samples.size() == before) {
      index.notes.push_back(
          fmt::format("{}: class {} ({}) has no image", root, label, index.classes[label]));
    }
  }
  if (index.samples.empty()) {
    throw InvalidArgument(fmt::format(
        "{}: no images in its {} class folders (files named .jpg, .jpeg, .png, .ppm, .bmp, .pgm, "
        ".tif, .tiff or .webp)",
        root, index.classes.size()));
  }
  return index;
}

}  // namespace dlb
