// Builds without CUDA: no host-to-device copy rows (micro.h).
#include "suites/micro/micro.h"

namespace dlb::micro {

std::string register_copy_benchmarks(const std::vector<MachinePeak>&) {
  return "this build has no CUDA backend";
}

}  // namespace dlb::micro
