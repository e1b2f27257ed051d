// Finite-difference gradient checks, after Caffe's GradientChecker. The objective is
// L = sum(y * r) for a fixed random r, so dL/dy = r; every input and parameter element checked
// (all of them, or a random sample for large tensors) must match the central difference.
#pragma once
#include <functional>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/nn/graph.h"
#include "runtime/nn/layer.h"

namespace dlb::testing {

struct CheckOptions {
  double step = 1e-2;
  double rel_tol = 1e-2;
  double abs_tol = 2e-3;
  int max_checks_per_tensor = 150;
  // Keeps inputs at least `kink` away from 0 (ReLU) and from each other (max pooling), so the
  // central difference never straddles a kink.
  bool avoid_kinks = false;
};

// Checks one layer on inputs of these shapes; reports failures through GoogleTest.
void check_layer(Layer& layer, const std::vector<Shape>& in_shapes, const CheckOptions& opt = {},
                 uint64_t seed = 1);
// Checks a whole graph (input gradient through backward() and every parameter).
void check_graph(Graph& graph, const CheckOptions& opt = {}, uint64_t seed = 1);

}  // namespace dlb::testing
