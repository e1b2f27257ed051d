// Whether the cuDNN this process loaded can run what dlbench was built against, by cuDNN's own
// compatibility rule (its developer guide, "cuDNN API Compatibility"): a release runs programs
// built against the same or an earlier minor release of its major version, and nothing across
// major versions. The cuDNN a GPU machine offers first may be PyTorch's pip wheel's, older than
// the headers here (/usr/local/cuda's). The CUDA backend checks at start-up and refuses an
// incompatible one as unsupported, naming both versions, rather than let a missing engine or
// attribute fail somewhere in the first step. Pure: host-tested without cuDNN.
#pragma once
#include <fmt/format.h>

#include <cstddef>
#include <string>

namespace dlb::cuda {

struct CudnnVersion {
  int major = 0, minor = 0, patch = 0;
  std::string str() const { return fmt::format("{}.{}.{}", major, minor, patch); }
};

// cudnnGetVersion()'s number (or CUDNN_VERSION's): major * 10000 + minor * 100 + patch from
// cuDNN 9 on (9.19.0 is 91900), major * 1000 + minor * 100 + patch before it (8.9.7 is 8907).
inline CudnnVersion cudnn_version_from(size_t code) {
  const int c = static_cast<int>(code);
  if (c >= 90000) return {c / 10000, (c % 10000) / 100, c % 100};
  return {c / 1000, (c % 1000) / 100, c % 100};
}

// Empty when `loaded` may run a program built against `built`; otherwise why not, and what to do.
inline std::string cudnn_incompatibility(const CudnnVersion& loaded, const CudnnVersion& built) {
  if (loaded.major == built.major && loaded.minor >= built.minor) return {};
  const std::string why =
      loaded.major != built.major
          ? "cuDNN is not compatible across major versions"
          : "cuDNN runs only programs built against the same or an earlier minor release";
  return fmt::format(
      "the cuDNN loaded is {}, and dlbench was built against cuDNN {}: {}. Put cuDNN {}.{} or a "
      "later {}.x first on LD_LIBRARY_PATH, or rebuild dlbench against the cuDNN you have, in a "
      "fresh build directory (cmake -DCUDNN_ROOT=...: an existing one keeps the cuDNN it found)",
      loaded.str(), built.str(), why, built.major, built.minor, built.major);
}

}  // namespace dlb::cuda
