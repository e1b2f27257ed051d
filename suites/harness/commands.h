// The subcommands main() dispatches to. Each returns an exit code or throws dlb::Error.
#pragma once
#include <string>

#include "runtime/backend/backend.h"

namespace dlb {

int list_command();

struct BenchConvOptions {
  std::string model = "resnet50";
  int64_t batch = 8, image_size = 64, repeat = 5;
  BackendKind backend = BackendKind::kCpu;
  std::string json_path;
};
// Times every distinct conv layer of a model (forward, backward-data, backward-filter) beside a
// plain matrix multiply of the forward's GEMM shape, in the same run.
int bench_conv_command(const BenchConvOptions& options);

}  // namespace dlb
