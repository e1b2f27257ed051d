#include "workloads/data/tar_writer.h"

#include <fmt/format.h>

#include <cstring>

#include "runtime/core/error.h"

namespace dlb {
namespace {

constexpr size_t kBlock = 512;

// `value` in octal, zero-padded to fill `width - 1` digits and a NUL, at `field`.
void put_octal(char* field, size_t width, uint64_t value) {
  const std::string digits = fmt::format("{:0{}o}", value, width - 1);
  if (digits.size() != width - 1) throw InvalidArgument("tar: a field's value does not fit");
  std::memcpy(field, digits.data(), digits.size());
  field[width - 1] = '\0';
}

}  // namespace

std::vector<char> tar_header(const std::string& name, uint64_t size) {
  if (name.empty() || name.size() > 100 || name.find('\0') != std::string::npos) {
    throw InvalidArgument(fmt::format("tar: a member name of 1-100 bytes, got '{}'", name));
  }
  std::vector<char> h(kBlock, '\0');
  std::memcpy(h.data(), name.data(), name.size());  // name[100]
  put_octal(&h[100], 8, 0644);                      // mode
  put_octal(&h[108], 8, 0);                         // uid
  put_octal(&h[116], 8, 0);                         // gid
  put_octal(&h[124], 12, size);                     // size
  put_octal(&h[136], 12, 0);                        // mtime
  h[156] = '0';                                     // a regular file
  std::memcpy(&h[257], "ustar", 6);                 // magic, with its NUL
  std::memcpy(&h[263], "00", 2);                    // version
  // The checksum: every byte of the header summed, its own field counted as spaces.
  std::memset(&h[148], ' ', 8);
  uint64_t sum = 0;
  for (char c : h) sum += static_cast<unsigned char>(c);
  put_octal(&h[148], 7, sum);
  h[155] = ' ';
  return h;
}

TarWriter::TarWriter(const std::string& path) : path_(path), out_(path, std::ios::binary) {
  if (!out_) throw IoError(fmt::format("{}: cannot be written", path));
}

void TarWriter::write(const char* data, size_t size) {
  out_.write(data, static_cast<std::streamsize>(size));
  if (!out_) throw IoError(fmt::format("{}: a write failed (is the disk full?)", path_));
}

void TarWriter::add(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::vector<char> header = tar_header(name, bytes.size());
  write(header.data(), header.size());
  write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const std::vector<char> pad((kBlock - bytes.size() % kBlock) % kBlock, '\0');
  write(pad.data(), pad.size());
}

void TarWriter::finish() {
  const std::vector<char> end(2 * kBlock, '\0');
  write(end.data(), end.size());
  out_.close();
  if (!out_) throw IoError(fmt::format("{}: could not be closed", path_));
}

}  // namespace dlb
