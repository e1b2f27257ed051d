#include "tests/gradcheck/gradient_checker.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime/core/rng.h"
#include "runtime/train/executor.h"

namespace dlb::testing {
namespace {

std::vector<float> host(Backend& b, const Tensor& t) {
  std::vector<float> v(t.numel());
  b.copy_to_host(t, v.data());
  return v;
}

void fill_random(Backend& b, Tensor& t, Rng& rng, bool avoid_kinks) {
  std::vector<float> v(t.numel());
  if (avoid_kinks) {
    // Distinct values spaced 0.05 apart, shuffled, none within 0.025 of zero.
    for (size_t i = 0; i < v.size(); ++i) {
      const float k = static_cast<float>(i) - static_cast<float>(v.size()) / 2.f;
      v[i] = 0.05f * k + (k >= 0 ? 0.025f : -0.025f);
    }
    for (size_t i = v.size() - 1; i > 0; --i) std::swap(v[i], v[rng.below(i + 1)]);
  } else {
    for (float& x : v) x = rng.normal(0.f, 1.f);
  }
  b.copy_from_host(v.data(), t);
}

std::vector<int64_t> sample(int64_t n, int max, Rng& rng) {
  std::vector<int64_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  if (n <= max) return idx;
  for (int64_t i = n - 1; i > 0; --i) std::swap(idx[i], idx[rng.below(i + 1)]);
  idx.resize(max);
  return idx;
}

// Compares the analytic gradient of tensor `t` with central differences of `objective`. With
// `zeros` (which outputs the last objective() left at zero: opt.skip_output_kinks), a probe that
// changes them straddles an output's kink and is skipped.
void compare(Backend& b, Tensor& t, const std::vector<float>& analytic,
             const std::function<double()>& objective, const CheckOptions& opt, Rng& rng,
             const std::string& what, const std::vector<char>* zeros = nullptr) {
  std::vector<float> v = host(b, t);
  int failures = 0, probes = 0, straddled = 0;
  for (int64_t i : sample(t.numel(), opt.max_checks_per_tensor, rng)) {
    const float orig = v[i];
    v[i] = orig + static_cast<float>(opt.step);
    b.copy_from_host(v.data(), t);
    const double plus = objective();
    const std::vector<char> plus_zeros = zeros ? *zeros : std::vector<char>{};
    v[i] = orig - static_cast<float>(opt.step);
    b.copy_from_host(v.data(), t);
    const double minus = objective();
    ++probes;
    if (zeros && *zeros != plus_zeros) {
      ++straddled;
      v[i] = orig;
      b.copy_from_host(v.data(), t);
      continue;
    }
    v[i] = orig;
    b.copy_from_host(v.data(), t);
    const double numeric = (plus - minus) / (2 * opt.step);
    const double a = analytic[i];
    const double tol = opt.rel_tol * std::max(std::abs(numeric), std::abs(a)) + opt.abs_tol;
    if (std::abs(numeric - a) > tol && ++failures <= 5) {
      ADD_FAILURE() << what << "[" << i << "]: analytic " << a << " numeric " << numeric;
    }
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " mismatches";
  EXPECT_LE(4 * straddled, probes)
      << what << ": " << straddled << " of " << probes << " probes straddle a kink";
}

}  // namespace

std::vector<BackendKind> gradcheck_backends() { return {BackendKind::kCpu}; }

std::unique_ptr<Backend> make_check_backend(BackendKind kind, ConvAlgoChoice conv_algo) {
  BackendOptions options;
  options.conv_algo = conv_algo;
  return make_backend(kind, options);
}

std::vector<std::pair<BackendKind, ConvAlgoChoice>> gradcheck_conv_algorithms() {
  std::vector<std::pair<BackendKind, ConvAlgoChoice>> out;
  for (BackendKind kind : gradcheck_backends()) {
    for (ConvAlgoChoice algo : named_conv_algorithms(kind)) out.emplace_back(kind, algo);
  }
  return out;
}

std::string backend_param_name(const ::testing::TestParamInfo<BackendKind>& info) {
  return std::string(backend_kind_name(info.param));
}

void check_layer(Backend& b, Layer& layer, const std::vector<Shape>& in_shapes,
                 const CheckOptions& opt, uint64_t seed) {
  Rng rng(seed);
  const StandaloneTensors own = setup_standalone(layer, b, in_shapes, rng);
  const LayerTensors& t = own.tensors;
  std::vector<Tensor> xs, dxs;
  for (const Shape& s : in_shapes) {
    xs.push_back(b.empty(s, DType::kF32, MemCategory::kActivations, "x"));
    fill_random(b, xs.back(), rng, opt.avoid_kinks);
    dxs.push_back(b.empty(s, DType::kF32, MemCategory::kActivations, "dx"));
  }
  const Shape ys = layer.output_shape(in_shapes);
  Tensor y = b.empty(ys, DType::kF32, MemCategory::kActivations, "y");
  Tensor r = b.empty(ys, DType::kF32, MemCategory::kActivations, "r");
  fill_random(b, r, rng, false);
  const std::vector<float> rh = host(b, r);
  std::vector<const Tensor*> in;
  for (Tensor& x : xs) in.push_back(&x);
  const LayerContext ctx{b, true, 42};
  std::vector<char> zeros;  // which outputs the last forward left at zero
  auto objective = [&] {
    layer.forward(ctx, t, in, y);
    const std::vector<float> yh = host(b, y);
    double s = 0;
    zeros.resize(yh.size());
    for (size_t i = 0; i < yh.size(); ++i) {
      s += static_cast<double>(yh[i]) * rh[i];
      zeros[i] = yh[i] == 0.f;
    }
    return s;
  };
  const std::vector<char>* kinks = opt.skip_output_kinks ? &zeros : nullptr;
  objective();
  std::vector<Tensor*> dx;
  for (Tensor& d : dxs) dx.push_back(&d);
  layer.backward_data(ctx, t, in, y, r, dx);
  if (!layer.fused_backward()) layer.backward_weights(ctx, t, in, y, r);
  for (size_t i = 0; i < xs.size(); ++i) {
    compare(b, xs[i], host(b, dxs[i]), objective, opt, rng, fmt::format("input {}", i), kinks);
  }
  for (const std::string& name : t.param_names()) {
    compare(b, t.get(name), host(b, t.grad(name)), objective, opt, rng, name, kinks);
  }
}

void check_graph(Backend& b, Graph& g, const CheckOptions& opt, uint64_t seed) {
  Rng rng(seed);
  g.setup(b, rng);
  const BoundStep& bound = g.bound();
  fill_random(b, bound.tensor(g.output_id(g.input())), rng, opt.avoid_kinks);
  Tensor r = b.empty(g.shape(g.output()), DType::kF32, MemCategory::kActivations, "r");
  fill_random(b, r, rng, false);
  const std::vector<float> rh = host(b, r);
  const LayerContext ctx{b, true, 42};
  // The graph's own passes, through the executor that runs a step's.
  Executor forward(g.forward_schedule(), PassRunners{&g}, b.clock());
  Executor backward(g.backward_schedule(), PassRunners{&g}, b.clock());
  auto objective = [&] {
    forward.run(0, &ctx);
    const std::vector<float> yh = host(b, bound.tensor(g.output_id(g.output())));
    double s = 0;
    for (size_t i = 0; i < yh.size(); ++i) s += static_cast<double>(yh[i]) * rh[i];
    return s;
  };
  objective();
  b.copy(r, bound.tensor(g.grad_id(g.output())));
  backward.run(0, &ctx);
  for (auto& np : g.named_params()) {
    compare(b, np.param.value, host(b, np.param.grad), objective, opt, rng, np.name);
  }
}

}  // namespace dlb::testing
