// The safetensors format (8-byte little-endian header length, a JSON header of
// {name: {dtype, shape, data_offsets}}, then the raw bytes), which PyTorch's safetensors
// package reads and writes. Files are written to a temporary name and renamed.
#pragma once
#include <map>
#include <string>
#include <string_view>

#include "runtime/core/host_tensor.h"

namespace dlb {

// The tensors of a safetensors file held in memory. `source` names it in errors. Strict, as the
// format's reference implementation is: InvalidArgument for a header that is too long, not UTF-8
// JSON, nested deeper than 64 levels, or with trailing bytes; an entry with a key, dtype, shape
// or offsets it does not define (floats, negatives, sizes past 2^63 bytes); a __metadata__ that
// is not a map of strings; or tensors that do not tile the data section exactly.
StateDict parse_safetensors(std::string_view file, const std::string& source);
// Throws IoError if the file cannot be read, and parse_safetensors' errors.
StateDict load_safetensors(const std::string& path);
void save_safetensors(const std::string& path, const StateDict& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace dlb
