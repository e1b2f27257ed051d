#include "runtime/io/safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <limits>
#include <tuple>

#include "runtime/core/checked.h"
#include "runtime/core/error.h"
#include "runtime/io/json_text.h"
#include "runtime/io/output_file.h"
#include "runtime/io/text_file.h"

namespace dlb {
namespace {
// The reference implementation's limits and rules (safetensors' Rust crate: read_metadata and
// Metadata::validate): a header of at most 100,000,000 bytes, UTF-8 JSON starting with '{'
// (whitespace may pad it), and tensors whose byte ranges, in offset order, tile the data section
// exactly: the first starts at 0, each starts where the one before ended, the last ends at the
// end of the file.
constexpr uint64_t kMaxHeader = 100'000'000;

[[noreturn]] void bad(const std::string& source, const std::string& why) {
  throw InvalidArgument(fmt::format("{}: not a valid safetensors file: {}", source, why));
}

uint64_t unsigned_at(const nlohmann::json& v, const std::string& source, const std::string& what) {
  if (!v.is_number_unsigned()) bad(source, fmt::format("{} must be an unsigned integer", what));
  return v.get<uint64_t>();
}

// A tensor's entry, checked on its own: dtype, shape and offsets, and nothing else.
struct Entry {
  std::string name;
  DType dtype{};
  std::vector<int64_t> dims;
  uint64_t begin = 0, end = 0;
};

Entry read_entry(const std::string& name, const nlohmann::json& e, const std::string& source) {
  const std::string where = fmt::format("tensor '{}'", name);
  if (!e.is_object()) bad(source, where + " is not an object");
  for (const auto& [key, _] : e.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      bad(source, fmt::format("{} has an unknown key '{}'", where, key));
  }
  if (!e.contains("dtype") || !e["dtype"].is_string())
    bad(source, where + " needs a string 'dtype'");
  if (!e.contains("shape") || !e["shape"].is_array()) bad(source, where + " needs a 'shape' array");
  if (!e.contains("data_offsets") || !e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
    bad(source, where + " needs 'data_offsets' [begin, end]");
  Entry out;
  out.name = name;
  const std::string dt = e["dtype"].get<std::string>();
  const auto dtype = dtype_from_safetensors(dt);
  if (!dtype) bad(source, fmt::format("{} has dtype {}, which dlbench does not read", where, dt));
  out.dtype = *dtype;
  uint64_t bytes = dtype_size(out.dtype);
  for (const auto& d : e["shape"]) {
    const uint64_t n = unsigned_at(d, source, where + "'s dimensions");
    if (n > static_cast<uint64_t>(INT64_MAX))
      bad(source, fmt::format("{} has a dimension of {}, past 2^63 - 1", where, n));
    bytes = checked_mul(bytes, n, fmt::format("{}: {}'s size in bytes", source, where));
    out.dims.push_back(static_cast<int64_t>(n));
  }
  if (bytes > static_cast<uint64_t>(INT64_MAX))
    bad(source, fmt::format("{} holds {} bytes, more than 2^63 - 1", where, bytes));
  out.begin = unsigned_at(e["data_offsets"][0], source, where + "'s data_offsets");
  out.end = unsigned_at(e["data_offsets"][1], source, where + "'s data_offsets");
  if (out.end < out.begin || out.end - out.begin != bytes) {
    bad(source, fmt::format("{}: shape {} and dtype {} take {} bytes, but its data_offsets are "
                            "[{}, {}]",
                            where, Shape(out.dims).str(), dt, bytes, out.begin, out.end));
  }
  return out;
}
}  // namespace

StateDict parse_safetensors(std::string_view file, const std::string& source) {
  if (file.size() < 8) bad(source, "shorter than the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i)
    header_len = (header_len << 8) | static_cast<unsigned char>(file[static_cast<size_t>(i)]);
  if (header_len > kMaxHeader) {
    bad(source, fmt::format("header length {} is over the format's limit of {} bytes", header_len,
                            kMaxHeader));
  }
  if (header_len > file.size() - 8) {
    bad(source,
        fmt::format("header length {} does not fit a file of {} bytes", header_len, file.size()));
  }
  const std::string_view header = file.substr(8, header_len);
  if (header.empty() || header[0] != '{') bad(source, "the header does not start with '{'");
  // nlohmann's parser refuses invalid UTF-8 and anything but whitespace after the object.
  const auto j = parse_json(header, fmt::format("{}: safetensors header", source));

  std::vector<Entry> entries;
  for (const auto& [name, entry] : j.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) bad(source, "__metadata__ is not an object of strings");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) bad(source, fmt::format("__metadata__ '{}' is not a string", key));
      }
      continue;
    }
    entries.push_back(read_entry(name, entry, source));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  const std::string_view data = file.substr(8 + header_len);
  uint64_t next = 0;
  StateDict out;
  for (const Entry& e : entries) {
    if (e.begin != next) {
      bad(source, fmt::format("tensor '{}' starts at byte {} of the data, not at {}: tensors must "
                              "tile the data without gaps or overlaps",
                              e.name, e.begin, next));
    }
    next = e.end;
    if (next > data.size()) {
      bad(source, fmt::format("tensor '{}' ends at byte {}, past the data's {} bytes", e.name, next,
                              data.size()));
    }
    HostTensor t{e.dtype, Shape(e.dims), {}};
    t.bytes.assign(data.begin() + static_cast<std::ptrdiff_t>(e.begin),
                   data.begin() + static_cast<std::ptrdiff_t>(e.end));
    out.emplace(e.name, std::move(t));
  }
  if (next != data.size()) {
    bad(source, fmt::format("the tensors cover {} bytes of the data, but it holds {} (is the "
                            "header length wrong?)",
                            next, data.size()));
  }
  return out;
}

StateDict load_safetensors(const std::string& path) {
  // A regular file only (a FIFO or /dev/zero is refused), of any size: weights are large.
  const std::string file =
      read_text_file(path, "safetensors file", std::numeric_limits<uint64_t>::max());
  return parse_safetensors(file, path);
}

void save_safetensors(const std::string& path, const StateDict& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::json j = nlohmann::json::object();
  if (!metadata.empty()) j["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {  // std::map: sorted by name, as safetensors does
    j[name] = {{"dtype", std::string(dtype_safetensors_name(t.dtype))},
               {"shape", t.shape.dims()},
               {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string header = j.dump();
  header.append((8 - header.size() % 8) % 8, ' ');  // align the data to 8 bytes
  unsigned char len_bytes[8];
  const uint64_t len = header.size();
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(len >> (8 * i));
  std::vector<std::string_view> pieces{
      std::string_view(reinterpret_cast<const char*>(len_bytes), 8), header};
  for (const auto& [name, t] : tensors) {
    pieces.emplace_back(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  }
  write_file_atomically(path, pieces);
}

}  // namespace dlb
