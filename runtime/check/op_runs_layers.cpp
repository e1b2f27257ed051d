// The op checker's runners of the ops with parameters: convolution, linear and batch norm, each
// pass called as the layer calls it (runtime/nn/layers/), on operands stored as the graph stores
// them (conv weights and their gradients in the activations' layout, or in oneDNN's blocks where
// the backend blocks them; parameters of batch norm in f32 under every precision).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "runtime/check/bounds.h"
#include "runtime/check/op_run.h"
#include "runtime/core/error.h"

namespace dlb {
namespace {

// A convolution's weights (or, `gradient`, their gradient): in the activations' layout, or in
// oneDNN's blocks (describe_weights_as_trained).
Layout stored_weights(const ConvDesc& d, bool gradient = false) {
  const Layout blocks = gradient ? d.grad_layout : d.weight_layout;
  return blocks != Layout::kNCHW ? blocks : d.layout;
}

PassAlgorithm pass_algorithm(const ConvPlan& plan, ConvPass p) {
  for (const PassAlgorithm& a : plan.algorithms())
    if (a.pass == p) return a;
  return {};
}

// Records the engine of pass `p` on the run; returns what it computes, which its bound rests on.
// A transform the library does not state has no derived bound: the pass is unsupported, never
// judged by the bound of an arithmetic it does not do.
ConvArithmetic engine_of(PassRun& run, const ConvPlan& plan, ConvPass p) {
  const PassAlgorithm a = pass_algorithm(plan, p);
  run.set_engine(a);
  if (a.arithmetic == ConvArithmetic::kUnstatedTransform) {
    const std::vector<std::string> notes =
        a.notes ? engine_note_names(*a.notes) : std::vector<std::string>{};
    throw Unsupported(
        fmt::format("{} (notes: {}) computes by a transform whose points and tiles its library "
                    "does not state: the op "
                    "checker has no bound derived for it",
                    a.algorithm, fmt::join(notes, ", ")));
  }
  return a.arithmetic;
}

double bytes_of(std::initializer_list<const Tensor*> ts) {
  double b = 0;
  for (const Tensor* t : ts) b += static_cast<double>(t->bytes());
  return b;
}

// The forward pass, alone or with its ReLU (the backend's conv_relu_forward), against the float64
// answer; with the ReLU, max(., 0) of it under the same bound, as a ReLU moves no value further
// from its answer.
void check_conv_forward(PassRun& run, const ConvPlan& plan, const HostArray& x, const HostArray& w,
                        const HostArray& b, const Tensor& tx, const Tensor& tw, bool relu) {
  const PrecisionPolicy& pol = run.policy();
  const ConvDesc& d = plan.desc();
  Operands& o = run.operands();
  Backend& be = run.backend();
  Tensor tb = o.upload(b, pol.compute_weights),
         ty = o.poisoned(run.op().out(), pol.activations, d.layout);
  const ConvArithmetic how = engine_of(run, plan, ConvPass::kForward);
  run.set_work(run.op().forward_flops(), bytes_of({&tx, &tw, &ty}));
  run.execute([&] {
    if (relu) {
      be.conv_relu_forward(plan, tx, tw, d.bias ? &tb : nullptr, ty);
    } else if (d.bias) {
      be.conv_bias_forward(plan, tx, tw, tb, ty);
    } else {
      be.conv_forward(plan, tx, tw, ty);
    }
  });
  if (!run.comparing()) return;
  Expected want = ref_conv_forward(d, x, w, d.bias ? &b : nullptr, run.arithmetic(), how);
  if (relu) ref_relu_in_place(want);
  run.compare("y", want, o.download(ty), pol.activations);
}

}  // namespace

void run_conv(PassRun& run) {
  const PrecisionPolicy& pol = run.policy();
  Operands& o = run.operands();
  ConvDesc d = run.op().conv;
  d.bias = run.op().bias;
  d.types = run.types();
  d.layout = run.layout();
  describe_weights_as_trained(run.backend(), pol.compute_weights != pol.master_weights, d);
  const std::unique_ptr<ConvPlan> plan = run.backend().make_conv_plan(d);
  const Shape ws{d.out_channels, d.in_channels / d.groups, d.kernel_h, d.kernel_w};
  const Shape ys = run.op().out();
  const HostArray x = o.draw("x", run.op().in, pol.activations, 0, 1);
  const HostArray w = o.draw("w", ws, pol.compute_weights, 0, 1);
  const HostArray b = o.draw("b", Shape{d.out_channels}, pol.compute_weights, 0, 1);
  const HostArray dy = o.draw("dy", ys, pol.activations, 0, 1);
  Tensor tx = o.upload(x, pol.activations, d.layout),
         tw = o.upload(w, pol.compute_weights, stored_weights(d));
  const Arithmetic& a = run.arithmetic();
  Backend& be = run.backend();
  if (run.pass() == CheckPass::kForward || run.pass() == CheckPass::kForwardRelu) {
    check_conv_forward(run, *plan, x, w, b, tx, tw, run.pass() == CheckPass::kForwardRelu);
  } else if (run.pass() == CheckPass::kBackwardData) {
    Tensor tdy = o.upload(dy, pol.activations, d.layout);
    Tensor tdx = o.poisoned(run.op().in, pol.activations, d.layout);
    const ConvArithmetic how = engine_of(run, *plan, ConvPass::kBackwardData);
    run.set_work(run.op().forward_flops(), bytes_of({&tdy, &tw, &tdx}));
    run.execute([&] { be.conv_backward_data(*plan, tdy, tw, tdx); });
    if (run.comparing())
      run.compare("dx", ref_conv_backward_data(d, dy, w, a, how), o.download(tdx), pol.activations);
  } else if (run.pass() == CheckPass::kBackwardWeights) {
    Tensor tdy = o.upload(dy, pol.activations, d.layout);
    Tensor tdw = o.poisoned(ws, pol.gradients, stored_weights(d, true));
    const ConvArithmetic how = engine_of(run, *plan, ConvPass::kBackwardFilter);
    run.set_work(run.op().forward_flops(), bytes_of({&tx, &tdy, &tdw}));
    run.execute([&] { be.conv_backward_filter(*plan, tx, tdy, tdw); });
    if (run.comparing())
      run.compare("dw", ref_conv_backward_filter(d, x, dy, a, how), o.download(tdw), pol.gradients);
  } else {
    Tensor tdy = o.upload(dy, pol.activations, d.layout);
    Tensor tdb = o.poisoned(Shape{d.out_channels}, pol.gradients);
    run.execute([&] { be.bias_backward(tdy, tdb); });
    if (run.comparing())
      run.compare("db", ref_bias_backward(dy, a), o.download(tdb), pol.gradients);
  }
}

void run_linear(PassRun& run) {
  const PrecisionPolicy& pol = run.policy();
  Operands& o = run.operands();
  const int64_t n = run.op().in[0], f = run.op().in[1], out = run.op().features;
  // Each pass draws only what it reads: vgg16's classifier weight is 103 million values.
  const auto x = [&] { return o.draw("x", run.op().in, pol.activations, 0, 1); };
  const auto w = [&] { return o.draw("w", Shape{out, f}, pol.compute_weights, 0, 1); };
  const HostArray dy = o.draw("dy", Shape{n, out}, pol.activations, 0, 1);
  Backend& be = run.backend();
  run.set_products(be.matmul_arithmetic(run.types()));
  const Arithmetic& a = run.arithmetic();
  const Precision math = run.policy().math;
  if (run.pass() == CheckPass::kForward) {
    const HostArray hx = x(), hw = w(), b = o.draw("b", Shape{out}, pol.compute_weights, 0, 1);
    Tensor tx = o.upload(hx, pol.activations), tw = o.upload(hw, pol.compute_weights),
           tb = o.upload(b, pol.compute_weights), ty = o.poisoned(Shape{n, out}, pol.activations);
    run.set_work(run.op().forward_flops(), bytes_of({&tx, &tw, &ty}));
    run.execute([&] {
      be.matmul(math, false, true, 1.f, tx, tw, 0.f, ty);
      be.bias_add(tb, ty);
    });
    if (run.comparing())
      run.compare("y", ref_linear_forward(hx, hw, b, a), o.download(ty), pol.activations);
  } else if (run.pass() == CheckPass::kBackwardData) {
    const HostArray hw = w();
    Tensor tw = o.upload(hw, pol.compute_weights), tdy = o.upload(dy, pol.activations),
           tdx = o.poisoned(run.op().in, pol.activations);
    run.set_work(run.op().forward_flops(), bytes_of({&tdy, &tw, &tdx}));
    run.execute([&] { be.matmul(math, false, false, 1.f, tdy, tw, 0.f, tdx); });
    if (run.comparing())
      run.compare("dx", ref_linear_backward_data(dy, hw, a), o.download(tdx), pol.activations);
  } else if (run.pass() == CheckPass::kBackwardWeights) {
    const HostArray hx = x();
    Tensor tdy = o.upload(dy, pol.activations), tx = o.upload(hx, pol.activations);
    Tensor tdw = o.poisoned(Shape{out, f}, pol.gradients);
    run.set_work(run.op().forward_flops(), bytes_of({&tdy, &tx, &tdw}));
    run.execute([&] { be.matmul(math, true, false, 1.f, tdy, tx, 0.f, tdw); });
    if (run.comparing())
      run.compare("dw", ref_linear_backward_weights(dy, hx, a), o.download(tdw), pol.gradients);
  } else {
    Tensor tdy = o.upload(dy, pol.activations), tdb = o.poisoned(Shape{out}, pol.gradients);
    run.execute([&] { be.bias_backward(tdy, tdb); });
    if (run.comparing())
      run.compare("db", ref_bias_backward(dy, a), o.download(tdb), pol.gradients);
  }
}

namespace {

// Batch norm's operands: 16-bit data with f32 parameters and statistics in 16-bit runs.
struct NormOperands {
  HostArray x, gamma, beta, rm, rv, dy;
  DType data, stats;
};

NormOperands norm_operands(PassRun& run) {
  Operands& o = run.operands();
  const Shape c{run.op().in[1]};
  NormOperands n;
  n.data = run.policy().activations;
  n.stats = run.policy().dtype(TensorRole::kStatistics);
  // An offset mean, so that a variance formula that cancels (E[x²] - μ²) shows.
  n.x = o.draw("x", run.op().in, n.data, 0.5, 1);
  n.gamma = o.uniform("gamma", c, n.stats, 0.5, 1.5);
  n.beta = o.draw("beta", c, n.stats, 0, 0.5);
  n.rm = o.draw("running_mean", c, n.stats, 0, 0.5);
  n.rv = o.uniform("running_var", c, n.stats, 0.5, 2);
  n.dy = o.draw("dy", run.op().in, n.data, 0, 1);
  return n;
}

void batch_norm_forward(PassRun& run, const NormOperands& n, bool relu) {
  Operands& o = run.operands();
  const OpInstance& op = run.op();
  const Shape c{op.in[1]};
  Tensor tx = o.upload(n.x, n.data, run.layout()), tg = o.upload(n.gamma, n.stats),
         tb = o.upload(n.beta, n.stats), trm = o.upload(n.rm, n.stats),
         trv = o.upload(n.rv, n.stats);
  Tensor tsm = o.poisoned(c, n.stats), tsi = o.poisoned(c, n.stats),
         ty = o.poisoned(op.in, n.data, run.layout());
  Backend& be = run.backend();
  run.set_work(0, bytes_of({&tx, &ty}));
  run.execute([&] {
    if (relu) {
      be.batch_norm_relu_train(tx, tg, tb, trm, trv, tsm, tsi, ty, op.momentum, op.eps);
    } else {
      be.batch_norm_train(tx, tg, tb, trm, trv, tsm, tsi, ty, op.momentum, op.eps);
    }
  });
  if (!run.comparing()) return;
  BatchNormTrain want =
      ref_batch_norm_train(n.x, n.gamma, n.beta, n.rm, n.rv, op.momentum, op.eps, run.arithmetic());
  if (relu) ref_relu_in_place(want.y);
  run.compare("y", want.y, o.download(ty), n.data);
  run.compare("save_mean", want.save_mean, o.download(tsm), n.stats);
  run.compare("save_invstd", want.save_invstd, o.download(tsi), n.stats);
  run.compare("running_mean", want.running_mean, o.download(trm), n.stats);
  run.compare("running_var", want.running_var, o.download(trv), n.stats);
}

void batch_norm_backward(PassRun& run, const NormOperands& n, bool relu) {
  Operands& o = run.operands();
  const OpInstance& op = run.op();
  const Shape c{op.in[1]};
  // The saved statistics and the (fused) output as a correct forward leaves them.
  BatchNormTrain fwd =
      ref_batch_norm_train(n.x, n.gamma, n.beta, n.rm, n.rv, op.momentum, op.eps, run.arithmetic());
  ref_relu_in_place(fwd.y);
  round_to(fwd.save_mean.want, n.stats);
  round_to(fwd.save_invstd.want, n.stats);
  round_to(fwd.y.want, n.data);
  Tensor tx = o.upload(n.x, n.data, run.layout()), tdy = o.upload(n.dy, n.data, run.layout()),
         tg = o.upload(n.gamma, n.stats), tsm = o.upload(fwd.save_mean.want, n.stats),
         tsi = o.upload(fwd.save_invstd.want, n.stats),
         ty = o.upload(fwd.y.want, n.data, run.layout());
  const DType grads = run.policy().gradients;
  Tensor tdx = o.poisoned(op.in, n.data, run.layout()), tdg = o.poisoned(c, grads),
         tdb = o.poisoned(c, grads);
  Backend& be = run.backend();
  run.set_work(0, bytes_of({&tx, &tdy, &tdx}));
  run.execute([&] {
    if (relu) {
      be.batch_norm_relu_backward(tx, ty, tdy, tg, tsm, tsi, tdx, tdg, tdb);
    } else {
      be.batch_norm_backward(tx, tdy, tg, tsm, tsi, tdx, tdg, tdb);
    }
  });
  if (!run.comparing()) return;
  const BatchNormGrads want =
      ref_batch_norm_backward(n.x, n.dy, n.gamma, fwd.save_mean.want, fwd.save_invstd.want,
                              relu ? &fwd.y.want : nullptr, run.arithmetic());
  run.compare("dx", want.dx, o.download(tdx), n.data);
  run.compare("dgamma", want.dgamma, o.download(tdg), grads);
  run.compare("dbeta", want.dbeta, o.download(tdb), grads);
}

void batch_norm_infer(PassRun& run, const NormOperands& n) {
  Operands& o = run.operands();
  Tensor tx = o.upload(n.x, n.data, run.layout()), tg = o.upload(n.gamma, n.stats),
         tb = o.upload(n.beta, n.stats), trm = o.upload(n.rm, n.stats),
         trv = o.upload(n.rv, n.stats);
  Tensor ty = o.poisoned(run.op().in, n.data, run.layout());
  run.set_work(0, bytes_of({&tx, &ty}));
  run.execute([&] { run.backend().batch_norm_infer(tx, tg, tb, trm, trv, ty, run.op().eps); });
  if (!run.comparing()) return;
  run.compare(
      "y", ref_batch_norm_infer(n.x, n.gamma, n.beta, n.rm, n.rv, run.op().eps, run.arithmetic()),
      o.download(ty), n.data);
}

}  // namespace

void run_batch_norm(PassRun& run) {
  const NormOperands n = norm_operands(run);
  switch (run.pass()) {
    case CheckPass::kForward:
      return batch_norm_forward(run, n, false);
    case CheckPass::kForwardRelu:
      return batch_norm_forward(run, n, true);
    case CheckPass::kForwardInfer:
      return batch_norm_infer(run, n);
    case CheckPass::kBackward:
      return batch_norm_backward(run, n, false);
    case CheckPass::kBackwardRelu:
      return batch_norm_backward(run, n, true);
    default:
      throw InvalidArgument(fmt::format("batch norm has no {} pass", check_pass_name(run.pass())));
  }
}

}  // namespace dlb
