// A tensor's bytes on the host, as state_dict entries and safetensors files hold them. Below nn/
// and io/ both: a layer saves its state into one, and a file reader fills one, without either
// knowing the other.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/core/dtype.h"
#include "runtime/core/shape.h"

namespace dlb {

struct HostTensor {
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<uint8_t> bytes;
};
using StateDict = std::map<std::string, HostTensor>;

}  // namespace dlb
