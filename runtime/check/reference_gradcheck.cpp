// grad mode: the float64 reference's backward against central differences of its forward. For
// L = Σ dy·f(inputs), each differentiable input's gradient at a few seeded elements is compared
// with (L(x + h) - L(x - h)) / 2h at h and h/2. The allowed difference comes from the arithmetic
// of the differences: the truncation error, which Richardson's estimate |D(h) - D(h/2)| bounds
// (within a factor of 3 for a smooth f), and float64's rounding of L, about ε·Σ|dyⱼ·yⱼ| / h.
// Where f is piecewise linear (ReLU, max pooling), an element within h of a kink shows a second
// difference above rounding and is skipped: a difference quotient across a kink means nothing.
#include <fmt/format.h>

#include <cfloat>
#include <cmath>
#include <functional>
#include <map>

#include "runtime/check/op_checker.h"
#include "runtime/check/reference.h"
#include "runtime/core/rng.h"

namespace dlb {
namespace {

constexpr int kElementsPerInput = 6;

struct Differentiable {
  std::map<std::string, HostArray> inputs;
  std::function<HostArray(const std::map<std::string, HostArray>&)> forward;
  // The gradient of Σ dy·forward with respect to each input.
  std::function<std::map<std::string, HostArray>(const std::map<std::string, HostArray>&,
                                                 const HostArray& dy)>
      backward;
  bool piecewise_linear = true;
};

HostArray ones(const Shape& s) {
  HostArray a(s);
  a.v.assign(a.v.size(), 1.0);
  return a;
}

HostArray normal(Rng& rng, const Shape& s, double mean = 0, double stddev = 1) {
  HostArray a(s);
  for (double& v : a.v) v = mean + stddev * rng.normal(0.f, 1.f);
  return a;
}

Differentiable conv_problem(const OpInstance& op, Rng& rng) {
  ConvDesc d = op.conv;
  d.bias = op.bias;
  const Shape ws{d.out_channels, d.in_channels / d.groups, d.kernel_h, d.kernel_w};
  Differentiable f;
  f.inputs = {{"x", normal(rng, op.in)}, {"w", normal(rng, ws)}};
  if (op.bias) f.inputs["b"] = normal(rng, Shape{d.out_channels});
  f.forward = [d](const auto& in) {
    return ref_conv_forward(d, in.at("x"), in.at("w"), d.bias ? &in.at("b") : nullptr, {}).want;
  };
  f.backward = [d](const auto& in, const HostArray& dy) {
    std::map<std::string, HostArray> g{{"x", ref_conv_backward_data(d, dy, in.at("w"), {}).want},
                                       {"w", ref_conv_backward_filter(d, in.at("x"), dy, {}).want}};
    if (d.bias) g["b"] = ref_bias_backward(dy, {}).want;
    return g;
  };
  return f;
}

Differentiable linear_problem(const OpInstance& op, Rng& rng) {
  Differentiable f;
  f.inputs = {{"x", normal(rng, op.in)},
              {"w", normal(rng, Shape{op.features, op.in[1]})},
              {"b", normal(rng, Shape{op.features})}};
  f.forward = [](const auto& in) {
    return ref_linear_forward(in.at("x"), in.at("w"), in.at("b"), {}).want;
  };
  f.backward = [](const auto& in, const HostArray& dy) {
    return std::map<std::string, HostArray>{
        {"x", ref_linear_backward_data(dy, in.at("w"), {}).want},
        {"w", ref_linear_backward_weights(dy, in.at("x"), {}).want},
        {"b", ref_bias_backward(dy, {}).want}};
  };
  return f;
}

Differentiable batch_norm_problem(const OpInstance& op, Rng& rng) {
  const Shape c{op.in[1]};
  const double eps = op.eps;
  Differentiable f;
  f.piecewise_linear = false;
  f.inputs = {
      {"x", normal(rng, op.in, 0.5)}, {"gamma", normal(rng, c, 1, 0.2)}, {"beta", normal(rng, c)}};
  const HostArray rm(c), rv = ones(c);
  f.forward = [=](const auto& in) {
    return ref_batch_norm_train(in.at("x"), in.at("gamma"), in.at("beta"), rm, rv, 0.1, eps, {})
        .y.want;
  };
  f.backward = [=](const auto& in, const HostArray& dy) {
    const BatchNormTrain s =
        ref_batch_norm_train(in.at("x"), in.at("gamma"), in.at("beta"), rm, rv, 0.1, eps, {});
    BatchNormGrads g = ref_batch_norm_backward(in.at("x"), dy, in.at("gamma"), s.save_mean.want,
                                               s.save_invstd.want, nullptr, {});
    return std::map<std::string, HostArray>{
        {"x", g.dx.want}, {"gamma", g.dgamma.want}, {"beta", g.dbeta.want}};
  };
  return f;
}

Differentiable unary_problem(const OpInstance& op, Rng& rng) {
  Differentiable f;
  f.inputs = {{"x", normal(rng, op.in)}};
  const Shape out = op.out();
  switch (op.kind) {
    case OpKind::kRelu:
      f.forward = [](const auto& in) { return ref_relu_forward(in.at("x")).want; };
      f.backward = [](const auto& in, const HostArray& dy) {
        return std::map<std::string, HostArray>{
            {"x", ref_relu_backward(ref_relu_forward(in.at("x")).want, dy).want}};
      };
      break;
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
      f.forward = [op, out](const auto& in) {
        return ref_pool_forward(op.pool, in.at("x"), out, {}).want;
      };
      f.backward = [op](const auto& in, const HostArray& dy) {
        return std::map<std::string, HostArray>{
            {"x", ref_pool_backward(op.pool, in.at("x"), dy, {}).want}};
      };
      break;
    case OpKind::kAdaptiveAvgPool:
      f.forward = [op](const auto& in) {
        return ref_adaptive_avg_pool_forward(in.at("x"), op.out_h, op.out_w, {}).want;
      };
      f.backward = [op](const auto&, const HostArray& dy) {
        return std::map<std::string, HostArray>{
            {"x", ref_adaptive_avg_pool_backward(dy, op.in, {}).want}};
      };
      break;
    default: {  // dropout, with a mask fixed here
      HostArray mask(op.in);
      const double keep = 1.0 / (1.0 - op.p);
      for (double& m : mask.v) m = rng.uniform() < op.p ? 0.0 : keep;
      f.forward = [mask](const auto& in) { return ref_multiply(in.at("x"), mask, {}).want; };
      f.backward = [mask](const auto&, const HostArray& dy) {
        return std::map<std::string, HostArray>{{"x", ref_multiply(dy, mask, {}).want}};
      };
    }
  }
  return f;
}

Differentiable loss_problem(const OpInstance& op, Rng& rng) {
  std::vector<int64_t> labels(static_cast<size_t>(op.in[0]));
  for (int64_t& l : labels) l = rng.below(op.in[1]);
  Differentiable f;
  f.piecewise_linear = false;
  f.inputs = {{"x", normal(rng, op.in, 0, 2)}};
  f.forward = [labels](const auto& in) {
    return ref_softmax_cross_entropy(in.at("x"), labels, {}).loss.want;
  };
  f.backward = [labels](const auto& in, const HostArray& dy) {
    const HostArray p = ref_softmax_cross_entropy(in.at("x"), labels, {}).probs.want;
    HostArray g = ref_softmax_cross_entropy_backward(p, labels, dy.v[0], {}).want;
    return std::map<std::string, HostArray>{{"x", g}};
  };
  return f;
}

CheckPass pass_for(OpKind kind, const std::string& input) {
  if (kind == OpKind::kBatchNorm) return CheckPass::kBackward;
  if (input == "w") return CheckPass::kBackwardWeights;
  if (input == "b") return CheckPass::kBackwardBias;
  return CheckPass::kBackwardData;
}

double objective(const Differentiable& f, const std::map<std::string, HostArray>& in,
                 const HostArray& dy, double* magnitude) {
  const HostArray y = f.forward(in);
  double l = 0, m = 0;
  for (size_t i = 0; i < y.v.size(); ++i) l += dy.v[i] * y.v[i], m += std::fabs(dy.v[i] * y.v[i]);
  if (magnitude) *magnitude = m;
  return l;
}

PassResult check_input(const OpInstance& op, const Differentiable& f, const std::string& name,
                       const HostArray& dy, const HostArray& grad, Rng& rng) {
  PassResult r;
  r.pass = pass_for(op.kind, name);
  auto in = f.inputs;
  HostArray& x = in.at(name);
  int64_t skipped = 0;
  for (int k = 0; k < kElementsPerInput; ++k) {
    const auto i = static_cast<size_t>(rng.below(x.numel()));
    const double x0 = x.v[i], h = 1e-4 * std::max(1.0, std::fabs(x0));
    double mag = 0;
    const double l0 = objective(f, in, dy, &mag);
    const auto at = [&](double dx) {
      x.v[i] = x0 + dx;
      const double l = objective(f, in, dy, nullptr);
      x.v[i] = x0;
      return l;
    };
    const double lp = at(h), lm = at(-h), lp2 = at(h / 2), lm2 = at(-h / 2);
    const double rounding = 16 * DBL_EPSILON * mag / h;
    if (f.piecewise_linear && std::fabs(lp - 2 * l0 + lm) > 64 * DBL_EPSILON * mag) {
      ++skipped;  // within h of a kink
      continue;
    }
    const double d1 = (lp - lm) / (2 * h), d2 = (lp2 - lm2) / h;
    const double tol = 4 * std::fabs(d1 - d2) + rounding + 1e-12 * std::fabs(d2);
    const double ratio = std::fabs(grad.v[i] - d2) / tol;
    if (r.worst.index < 0 || ratio > r.worst.ratio)
      r.worst = {"d" + name, static_cast<int64_t>(i), grad.v[i], d2, tol, ratio};
    if (!(ratio <= 1)) r.status = CheckStatus::kFail;
    ++r.elements;
  }
  if (skipped) r.message = fmt::format("{} element(s) at a kink skipped", skipped);
  return r;
}

}  // namespace

std::vector<PassResult> check_reference_gradients(const OpInstance& op, uint64_t seed) {
  Rng rng(seed ^ 0x6772616463686b00ull);
  Differentiable f;
  switch (op.kind) {
    case OpKind::kConv:
      f = conv_problem(op, rng);
      break;
    case OpKind::kLinear:
      f = linear_problem(op, rng);
      break;
    case OpKind::kBatchNorm:
      f = batch_norm_problem(op, rng);
      break;
    case OpKind::kSoftmaxCrossEntropy:
      f = loss_problem(op, rng);
      break;
    case OpKind::kAdd:
    case OpKind::kSgd:
    case OpKind::kLossScale:
      return {};  // nothing to differentiate: a sum's gradient is dy itself; an update has none
    default:
      f = unary_problem(op, rng);
  }
  // The loss is its own objective: its output's weight is one.
  const HostArray dy =
      op.kind == OpKind::kSoftmaxCrossEntropy ? ones(Shape{1}) : normal(rng, op.out());
  const std::map<std::string, HostArray> grads = f.backward(f.inputs, dy);
  std::vector<PassResult> out;
  for (const auto& [name, g] : grads) out.push_back(check_input(op, f, name, dy, g, rng));
  return out;
}

}  // namespace dlb
