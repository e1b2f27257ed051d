// `dlbench check-ops`: every op instance of the reference models (check_grid.h), or the ones
// given with --instance, run on a backend at each precision and convolution algorithm it offers,
// each pass compared with the float64 reference within bounds from the arithmetic
// (runtime/check/). Prints a table by op, each failure with its worst element and a command that
// reproduces it alone, and writes a JSON record. Exit 0 when nothing failed, 1 when a check did.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"

namespace dlb {

struct CheckOpsOptions {
  std::optional<BackendKind> backend;   // the GPU when one is visible, else the CPU
  std::vector<std::string> precisions;  // every one the backend supports when empty
  std::vector<std::string> conv_algos;  // every algorithm the backend names when empty
  std::vector<std::string> models;      // the grid (check_grid.h); ignored with instances
  std::vector<int64_t> sizes, batches;
  std::vector<std::string> ops, passes;
  std::vector<std::string> instances;  // op instance texts, instead of the grid
  std::string mode = "compare";        // compare, perf or grad
  uint64_t seed = 1;
  int64_t repeats = 5;
  std::string json_path;
  bool list = false;     // print the instances and stop
  bool verbose = false;  // a line per check, not only failures
  std::string perturb;   // test only: break this pass on purpose (perturbing_backend.h)
  // cuda: which engines fp16 and bf16 convolutions may take (backend.h's ConvMath); each is
  // judged by the reduction its engine declares. Unset: fast.
  std::string conv_math;
};

int check_ops_command(const CheckOpsOptions& options);

}  // namespace dlb
