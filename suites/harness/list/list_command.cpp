// `dlbench list`: models (parameters, forward GFLOPs per image, smallest image), backends, and
// the devices this machine has.
#include "suites/harness/list/list_command.h"

#include <fmt/format.h>

#include "runtime/backend/backend.h"
#include "runtime/core/error.h"
#include "suites/harness/core/suite.h"
#include "workloads/models/model.h"

namespace dlb {

int list_command() {
  fmt::print("models (at their default image size, batch 1; GFLOPs count a multiply-add as 2):\n");
  fmt::print("  {:<11} {:>13} {:>8} {:>12} {:>9}  {}\n", "name", "parameters", "image",
             "fwd GFLOPs", "min size", "description");
  for (const ModelInfo& m : model_registry()) {
    const Graph g = m.build(ModelConfig{1, m.default_image_size, m.default_classes, {}});
    fmt::print("  {:<11} {:>13L} {:>5}x{:<2} {:>12.3f} {:>9}  {}\n", m.name, g.num_params(),
               m.default_image_size, m.default_image_size, g.forward_flops() / 1e9,
               min_image_size(m), m.description);
  }
  fmt::print("suites ({}):\n", suites_dir());
  for (const std::string& name : list_suites()) {
    try {
      const Suite s = load_suite(name, !gpu_available());
      fmt::print("  {:<11} {:>3} points  {}\n", name, expand(s).size(), s.description);
    } catch (const Error& e) {
      fmt::print("  {:<11} invalid: {}\n", name, e.what());
    }
  }
  fmt::print(
      "  {:<11}            GEMM, convolutions, copies and all-reduce, each as a fraction of "
      "this machine's measured peak (Google Benchmark)\n",
      "micro");
  fmt::print("backends:\n");
  for (BackendKind k : {BackendKind::kCpu, BackendKind::kCuda}) {
    fmt::print("  {:<5} {}\n", backend_kind_name(k),
               backend_compiled(k) ? "compiled in" : "not compiled in");
  }
  fmt::print("devices:\n");
  for (const std::string& d : list_devices()) fmt::print("  {}\n", d);
  return 0;
}

}  // namespace dlb
