// The safetensors format (8-byte little-endian header length, a JSON header of
// {name: {dtype, shape, data_offsets}}, then the raw bytes), which PyTorch's safetensors
// package reads and writes. Files are written to a temporary name and renamed.
#pragma once
#include <map>
#include <string>

#include "runtime/nn/layer.h"

namespace dlb {

// Throws IoError if the file cannot be read and InvalidArgument if it is not valid safetensors.
StateDict load_safetensors(const std::string& path);
void save_safetensors(const std::string& path, const StateDict& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace dlb
