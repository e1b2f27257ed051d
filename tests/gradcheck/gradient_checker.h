// Finite-difference gradient checks, after Caffe's GradientChecker. The objective is
// L = sum(y * r) for a fixed random r, so dL/dy = r; every input and parameter element checked
// (all of them, or a random sample for large tensors) must match the central difference.
//
// The checks run on any backend: the caller passes it, and the tests are parameterized over
// gradcheck_backends(), so a backend that implements the training ops reuses every check.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/nn/graph.h"
#include "runtime/nn/layer.h"

namespace dlb {
// How gtest prints a BackendKind parameter: "cpu", not its bytes.
inline void PrintTo(BackendKind kind, std::ostream* os) { *os << backend_kind_name(kind); }
}  // namespace dlb

namespace dlb::testing {

struct CheckOptions {
  double step = 1e-2;
  double rel_tol = 1e-2;
  double abs_tol = 2e-3;
  int max_checks_per_tensor = 150;
  // Keeps inputs at least `kink` away from 0 (ReLU) and from each other (max pooling), so the
  // central difference never straddles a kink.
  bool avoid_kinks = false;
  // For a layer whose output goes through a ReLU of its own (a convolution given its ReLU), where
  // the kink is in the output, not the input: a probe whose +step and -step forwards leave
  // different outputs at zero straddles the kink, and its central difference is no derivative.
  // Such probes are skipped (the tie settled before judging), and at most a quarter may be.
  bool skip_output_kinks = false;
};

// The backends whose training ops the checks cover: the CPU today. A backend joins this list
// when it implements every op of the Backend seam (the CUDA backend: only where a GPU is visible).
std::vector<BackendKind> gradcheck_backends();
// A fresh backend of this kind, with no memory budget (and the given --conv-algo).
std::unique_ptr<Backend> make_check_backend(BackendKind kind,
                                            ConvAlgoChoice conv_algo = ConvAlgoChoice::kHeuristic);
// Each backend with each convolution algorithm it names: (cpu, im2col), (cpu, onednn), ...
std::vector<std::pair<BackendKind, ConvAlgoChoice>> gradcheck_conv_algorithms();
// gtest's name for a backend parameter ("cpu"), and how a failure prints it.
std::string backend_param_name(const ::testing::TestParamInfo<BackendKind>& info);

// Checks one layer on `backend`, on inputs of these shapes; reports failures through
// GoogleTest.
void check_layer(Backend& backend, Layer& layer, const std::vector<Shape>& in_shapes,
                 const CheckOptions& opt = {}, uint64_t seed = 1);
// Checks a whole graph on `backend` (input gradient through backward() and every parameter).
void check_graph(Backend& backend, Graph& graph, const CheckOptions& opt = {}, uint64_t seed = 1);

}  // namespace dlb::testing
