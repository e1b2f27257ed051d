// A tar archive written member by member (POSIX ustar, as GNU tar and Python's tarfile read it):
// the shards of `dlbench make-dataset`, WebDataset's layout (`key.jpg` beside `key.cls`).
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace dlb {

class TarWriter {
 public:
  // Creates (truncates) `path`; IoError when it cannot be written.
  explicit TarWriter(const std::string& path);
  // A regular file of `bytes` named `name` (at most 100 bytes, no NUL), mode 0644, mtime 0 (the
  // archive's bytes depend on its members alone). InvalidArgument for a name that does not fit.
  void add(const std::string& name, const std::vector<uint8_t>& bytes);
  // The two zero blocks that end an archive, then the file closed; IoError if a write failed.
  void finish();

 private:
  void write(const char* data, size_t size);
  std::string path_;
  std::ofstream out_;
};

// A member's 512-byte ustar header (exposed for tests).
std::vector<char> tar_header(const std::string& name, uint64_t size);

}  // namespace dlb
