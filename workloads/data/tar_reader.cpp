#include "workloads/data/tar_reader.h"

#include <fmt/format.h>
#include <glob.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>

#include "runtime/core/error.h"

namespace dlb {
namespace {

constexpr size_t kBlock = 512;

// An octal field of a header: digits, optionally led by spaces and ended by a space or NUL.
uint64_t octal_field(const uint8_t* field, size_t width, const std::string& where,
                     const char* what) {
  uint64_t value = 0;
  size_t i = 0;
  while (i < width && field[i] == ' ') ++i;
  size_t digits = 0;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i, ++digits) {
    if (value > (UINT64_MAX >> 3)) break;
    value = value * 8 + static_cast<uint64_t>(field[i] - '0');
  }
  const bool ends = i == width || field[i] == ' ' || field[i] == '\0';
  if (digits == 0 || !ends) {
    throw InvalidArgument(fmt::format("{}: a tar header's {} field is not octal", where, what));
  }
  return value;
}

std::string text_field(const uint8_t* field, size_t width) {
  const auto* end = std::find(field, field + width, uint8_t{0});
  return {field, end};
}

bool zero_block(const uint8_t* b) {
  return std::all_of(b, b + kBlock, [](uint8_t c) { return c == 0; });
}

void check_sum(const uint8_t* h, const std::string& where) {
  uint64_t sum = 0;
  for (size_t i = 0; i < kBlock; ++i) sum += (i >= 148 && i < 156) ? ' ' : h[i];
  if (octal_field(h + 148, 8, where, "checksum") != sum) {
    throw InvalidArgument(fmt::format("{}: a tar header's checksum is wrong", where));
  }
}

// A pax header's path record ("NN path=NAME\n"), if it has one.
std::string pax_path(const uint8_t* data, uint64_t size) {
  const std::string text(data, data + size);
  const size_t at = text.find(" path=");
  if (at == std::string::npos) return "";
  const size_t end = text.find('\n', at);
  return text.substr(at + 6, end == std::string::npos ? std::string::npos : end - at - 6);
}

}  // namespace

std::vector<TarMember> tar_members(const uint8_t* bytes, size_t size, const std::string& where) {
  std::vector<TarMember> out;
  std::string next_name;  // from a GNU long name or a pax header, for the next member
  size_t at = 0;
  while (at + kBlock <= size) {
    const uint8_t* h = bytes + at;
    if (zero_block(h)) break;
    check_sum(h, where);
    const uint64_t length = octal_field(h + 124, 12, where, "size");
    const uint64_t data = at + kBlock;
    if (length > size - data) {
      throw InvalidArgument(fmt::format("{}: a member runs past the end of the file", where));
    }
    const char type = static_cast<char>(h[156]);
    std::string name = text_field(h, 100);
    const std::string prefix = text_field(h + 345, 155);
    // The prefix field is POSIX ustar's ("ustar\0"); GNU headers hold other fields there.
    const bool ustar = std::equal(h + 257, h + 263, "ustar");  // with its NUL
    if (ustar && !prefix.empty()) name = prefix + "/" + name;
    if (type == 'L') {
      next_name = text_field(bytes + data, static_cast<size_t>(length));
    } else if (type == 'x') {
      next_name = pax_path(bytes + data, length);
    } else if (type == '0' || type == '\0') {
      out.push_back({next_name.empty() ? name : next_name, data, length});
      next_name.clear();
    } else {
      next_name.clear();
    }
    at = data + (length + kBlock - 1) / kBlock * kBlock;
  }
  return out;
}

namespace {

std::vector<std::string> shard_files(const std::string& pattern) {
  std::error_code ec;
  const std::string glob_pattern =
      std::filesystem::is_directory(pattern, ec) ? pattern + "/*.tar" : pattern;
  glob_t g{};
  std::vector<std::string> files;
  if (glob(glob_pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) files.emplace_back(g.gl_pathv[i]);
  }
  globfree(&g);
  std::sort(files.begin(), files.end());
  if (files.empty()) throw InvalidArgument(fmt::format("{}: names no tar file", pattern));
  return files;
}

// Where a member's key ends: at the first dot after its last slash (npos: no extension).
size_t key_end(const std::string& name) {
  const size_t slash = name.rfind('/');
  return name.find('.', slash == std::string::npos ? 0 : slash + 1);
}

std::string key_of(const std::string& name) { return name.substr(0, key_end(name)); }

std::string lower_extension(const std::string& name) {
  const size_t dot = key_end(name);
  std::string ext = dot == std::string::npos ? "" : name.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext;
}

// A .cls member's label: a whole number, at most 2^31 - 1, spaces around it allowed.
bool parse_label(const std::vector<uint8_t>& bytes, const TarMember& m, int64_t& label) {
  std::string text(bytes.begin() + static_cast<std::ptrdiff_t>(m.offset),
                   bytes.begin() + static_cast<std::ptrdiff_t>(m.offset + m.size));
  const size_t first = text.find_first_not_of(" \t\r\n"), last = text.find_last_not_of(" \t\r\n");
  if (first == std::string::npos) return false;
  text = text.substr(first, last - first + 1);
  if (text.size() > 10 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  label = std::stoll(text);
  return label <= 2147483647;
}

std::vector<uint8_t> read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw InvalidArgument(fmt::format("{}: cannot be read", path));
  const std::streamoff size = in.tellg();
  if (size < 0 || size > (std::streamoff{1} << 40)) {
    throw InvalidArgument(fmt::format("{}: not a readable file", path));
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), size);
  if (!in) throw InvalidArgument(fmt::format("{}: cannot be read", path));
  return bytes;
}

// One shard's samples into `index`: consecutive members of one key.
void index_shard(const std::string& path, ShardIndex& index) {
  const std::vector<uint8_t> bytes = read_whole(path);
  const std::vector<TarMember> members = tar_members(bytes.data(), bytes.size(), path);
  for (size_t i = 0; i < members.size();) {
    const std::string key = key_of(members[i].name);
    const TarMember* image = nullptr;
    int64_t label = -1;
    bool bad_label = false;
    for (; i < members.size() && key_of(members[i].name) == key; ++i) {
      const std::string ext = lower_extension(members[i].name);
      if (ext == "jpg" || ext == "jpeg") image = &members[i];
      if (ext == "cls" && !parse_label(bytes, members[i], label)) bad_label = true;
    }
    if (!image || label < 0 || bad_label) {
      index.notes.push_back(fmt::format("{}: sample {} has {}, skipped", path, key,
                                        !image ? "no .jpg" : "no whole-number .cls label"));
      continue;
    }
    index.samples.push_back(
        {path, label, static_cast<int64_t>(image->offset), static_cast<int64_t>(image->size)});
    index.classes = std::max(index.classes, label + 1);
  }
}

}  // namespace

ShardIndex index_shards(const std::string& pattern) {
  ShardIndex index;
  index.shards = shard_files(pattern);
  for (const std::string& path : index.shards) index_shard(path, index);
  if (index.samples.empty()) {
    throw InvalidArgument(
        fmt::format("{}: no sample has both an image (.jpg) and a label (.cls) in its {} shard(s)",
                    pattern, index.shards.size()));
  }
  return index;
}

}  // namespace dlb
