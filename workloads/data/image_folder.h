// An ImageNet-layout folder as torchvision's ImageFolder reads it: the classes are the
// sub-folders' names, sorted (by bytes); their images every file under each, the folders walked
// in sorted order (symbolic links followed), named with one of ImageFolder's image extensions
// (any case). Unlike ImageFolder, a class folder with no image is kept (its label too, so the
// labels still match ImageFolder's on the rest) and reported, and a symbolic-link loop is
// reported and not followed again.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dlb {

// An image's bytes: a whole file, or (a tar shard's member) `size` bytes at `offset` of it.
struct ImageSample {
  std::string path;
  int64_t label = 0;
  int64_t offset = 0, size = -1;  // -1: the whole file
};

struct ImageFolderIndex {
  std::string root;
  std::vector<std::string> classes;  // sorted; the label is the index
  std::vector<ImageSample> samples;  // class by class, each in sorted path order
  std::vector<std::string> notes;    // empty classes, loops: one line each
};

// InvalidArgument when `root` is not a folder, has no class folder, or no image in any.
ImageFolderIndex scan_image_folder(const std::string& root);

}  // namespace dlb
