#include "runtime/io/safetensors.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/core/error.h"

namespace dlb {
namespace {
constexpr uint64_t kMaxHeader = 100u << 20;  // the reference implementation's limit

[[noreturn]] void bad(const std::string& path, const std::string& why) {
  throw InvalidArgument(fmt::format("{}: not a valid safetensors file: {}", path, why));
}
}  // namespace

StateDict load_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw IoError(fmt::format("cannot open '{}'", path));
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  if (file_size < 8) bad(path, "shorter than the 8-byte header length");
  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > kMaxHeader || 8 + header_len > file_size) {
    bad(path,
        fmt::format("header length {} does not fit a file of {} bytes", header_len, file_size));
  }
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header);
  } catch (const nlohmann::json::exception& e) {
    bad(path, fmt::format("header is not JSON ({})", e.what()));
  }
  if (!j.is_object()) bad(path, "header is not a JSON object");
  const uint64_t data_size = file_size - 8 - header_len;
  std::vector<uint8_t> data(data_size);
  in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(data_size));

  StateDict out;
  for (auto& [name, entry] : j.items()) {
    if (name == "__metadata__") continue;
    try {
      const std::string dt = entry.at("dtype").get<std::string>();
      auto dtype = dtype_from_safetensors(dt);
      if (!dtype)
        bad(path, fmt::format("tensor '{}' has dtype {}, which dlbench does not read", name, dt));
      std::vector<int64_t> dims = entry.at("shape").get<std::vector<int64_t>>();
      for (int64_t d : dims)
        if (d < 0) bad(path, fmt::format("tensor '{}' has a negative dimension", name));
      const auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size) {
        bad(path, fmt::format("tensor '{}' has data offsets outside the file", name));
      }
      HostTensor t{*dtype, Shape(dims), {}};
      if (static_cast<uint64_t>(t.shape.numel()) * dtype_size(*dtype) != offsets[1] - offsets[0]) {
        bad(path, fmt::format("tensor '{}': shape {} and {} bytes disagree", name, t.shape.str(),
                              offsets[1] - offsets[0]));
      }
      t.bytes.assign(data.begin() + offsets[0], data.begin() + offsets[1]);
      out.emplace(name, std::move(t));
    } catch (const nlohmann::json::exception& e) {
      bad(path, fmt::format("entry '{}' is malformed ({})", name, e.what()));
    }
  }
  return out;
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
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw IoError(fmt::format("cannot write '{}'", tmp));
    unsigned char len_bytes[8];
    uint64_t len = header.size();
    for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(len >> (8 * i));
    out.write(reinterpret_cast<const char*>(len_bytes), 8);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (const auto& [name, t] : tensors)
      out.write(reinterpret_cast<const char*>(t.bytes.data()),
                static_cast<std::streamsize>(t.bytes.size()));
    if (!out.flush()) throw IoError(fmt::format("writing '{}' failed", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw IoError(fmt::format("cannot rename '{}' to '{}'", tmp, path));
  }
}

}  // namespace dlb
