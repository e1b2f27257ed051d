// The op checker's runners of the ops without parameters (ReLU, pooling, dropout, the residual
// sum), the loss, and the optimizer's update with loss scaling's passes.
#include <fmt/format.h>

#include <cmath>

#include "runtime/check/bounds.h"
#include "runtime/check/op_run.h"
#include "runtime/core/half.h"

namespace dlb {

void run_relu(PassRun& run) {
  Operands& o = run.operands();
  const DType t = run.policy().activations;
  const HostArray x = o.draw("x", run.op().in, t, 0, 1);
  Backend& be = run.backend();
  if (run.pass() == CheckPass::kForward) {
    Tensor tx = o.upload(x, t, run.layout()), ty = o.poisoned(x.shape, t, run.layout());
    run.execute([&] { be.relu_forward(tx, ty); });
    if (run.comparing()) run.compare("y", ref_relu_forward(x), o.download(ty), t);
    return;
  }
  const HostArray y = ref_relu_forward(x).want, dy = o.draw("dy", x.shape, t, 0, 1);
  Tensor ty = o.upload(y, t, run.layout()), tdy = o.upload(dy, t, run.layout());
  Tensor tdx = o.poisoned(x.shape, t, run.layout());
  run.execute([&] { be.relu_backward(ty, tdy, tdx); });
  if (run.comparing()) run.compare("dx", ref_relu_backward(y, dy), o.download(tdx), t);
}

// Max pooling where the backend keeps each output's argmax (Backend::saves_pool_argmax), as a
// training step runs it: the forward pass that keeps the places, and the backward from them
// (after the search's, so that perf times this one).
void run_max_pool_argmax(PassRun& run, const HostArray& x, const Tensor& tx) {
  Operands& o = run.operands();
  const DType t = run.policy().activations;
  const PoolDesc& p = run.op().pool;
  const Shape ys = run.op().out();
  Backend& be = run.backend();
  const Arithmetic& a = run.arithmetic();
  Tensor ty = o.poisoned(ys, t, run.layout());
  Tensor places =
      be.empty(ys, DType::kI64, MemCategory::kActivations, "max pool argmax", run.layout());
  if (run.pass() == CheckPass::kForward) {
    run.execute([&] { be.max_pool_forward_argmax(p, tx, ty, places); });
    if (run.comparing())
      run.compare("y (argmax kept)", ref_pool_forward(p, x, ys, a), o.download(ty), t);
    return;
  }
  be.max_pool_forward_argmax(p, tx, ty, places);
  const HostArray dy = o.draw("dy", ys, t, 0, 1);
  Tensor tdy = o.upload(dy, t, run.layout()), tdx = o.poisoned(x.shape, t, run.layout());
  run.execute([&] { be.max_pool_backward_argmax(p, places, tdy, tdx); });
  if (run.comparing()) {
    run.compare("dx (from argmax)", ref_pool_backward(p, x, dy, a), o.download(tdx), t);
  }
}

void run_pool(PassRun& run) {
  Operands& o = run.operands();
  const DType t = run.policy().activations;
  const PoolDesc& p = run.op().pool;
  const Shape ys = run.op().out();
  const HostArray x = o.draw("x", run.op().in, t, 0, 1);
  Tensor tx = o.upload(x, t, run.layout());
  Backend& be = run.backend();
  const Arithmetic& a = run.arithmetic();
  const bool argmax = p.mode == PoolMode::kMax && be.saves_pool_argmax();
  if (run.pass() == CheckPass::kForward) {
    Tensor ty = o.poisoned(ys, t, run.layout());
    run.execute([&] { be.pool_forward(p, tx, ty); });
    if (run.comparing()) run.compare("y", ref_pool_forward(p, x, ys, a), o.download(ty), t);
    if (argmax) run_max_pool_argmax(run, x, tx);
    return;
  }
  HostArray y = ref_pool_forward(p, x, ys, a).want;
  round_to(y, t);
  const HostArray dy = o.draw("dy", ys, t, 0, 1);
  Tensor ty = o.upload(y, t, run.layout()), tdy = o.upload(dy, t, run.layout());
  Tensor tdx = o.poisoned(x.shape, t, run.layout());
  run.execute([&] { be.pool_backward(p, tx, ty, tdy, tdx); });
  if (run.comparing()) run.compare("dx", ref_pool_backward(p, x, dy, a), o.download(tdx), t);
  if (argmax) run_max_pool_argmax(run, x, tx);
}

void run_adaptive_avg_pool(PassRun& run) {
  Operands& o = run.operands();
  const DType t = run.policy().activations;
  const Shape ys = run.op().out();
  Backend& be = run.backend();
  const Arithmetic& a = run.arithmetic();
  if (run.pass() == CheckPass::kForward) {
    const HostArray x = o.draw("x", run.op().in, t, 0, 1);
    Tensor tx = o.upload(x, t, run.layout()), ty = o.poisoned(ys, t, run.layout());
    run.execute([&] { be.adaptive_avg_pool_forward(tx, ty); });
    if (run.comparing()) {
      run.compare("y", ref_adaptive_avg_pool_forward(x, run.op().out_h, run.op().out_w, a),
                  o.download(ty), t);
    }
    return;
  }
  const HostArray dy = o.draw("dy", ys, t, 0, 1);
  Tensor tdy = o.upload(dy, t, run.layout()), tdx = o.poisoned(run.op().in, t, run.layout());
  run.execute([&] { be.adaptive_avg_pool_backward(tdy, tdx); });
  if (run.comparing()) {
    run.compare("dx", ref_adaptive_avg_pool_backward(dy, run.op().in, a), o.download(tdx), t);
  }
}

namespace {

// A drawn mask holds 0 or 1/(1-p) as its type stores it, and drops about p of the elements: at
// most 6 standard deviations of the binomial count from n·p.
void check_mask(PassRun& run, const HostArray& mask, DType t) {
  const double p = run.op().p, keep = stored_value(1.f / (1.f - run.op().p), t);
  int64_t dropped = 0;
  for (size_t i = 0; i < mask.v.size(); ++i) {
    if (mask.v[i] == 0) {
      ++dropped;
    } else if (mask.v[i] != keep) {
      run.fail(fmt::format("mask element {} is {}, neither 0 nor {}", i, mask.v[i], keep));
      return;
    }
  }
  const double n = static_cast<double>(mask.numel()), spread = 6 * std::sqrt(n * p * (1 - p)) + 1;
  if (std::fabs(static_cast<double>(dropped) - n * p) > spread) {
    run.fail(fmt::format("the mask drops {} of {} elements; p = {} expects {:.0f} +- {:.0f}",
                         dropped, mask.numel(), p, n * p, spread));
  }
}

}  // namespace

void run_dropout(PassRun& run) {
  Operands& o = run.operands();
  const DType t = run.policy().activations;
  const Shape& s = run.op().in;
  const float p = run.op().p;
  Backend& be = run.backend();
  if (run.pass() == CheckPass::kForward) {
    const HostArray x = o.draw("x", s, t, 0, 1);
    Tensor tx = o.upload(x, t, run.layout()), tm = o.poisoned(s, t, run.layout()),
           ty = o.poisoned(s, t, run.layout());
    run.execute([&] { be.dropout_forward(tx, p, DropoutSeed{0x5EED}, tm, ty); });
    if (!run.comparing()) return;
    const HostArray mask = o.download(tm);
    check_mask(run, mask, t);
    run.compare("y", ref_multiply(x, mask, run.arithmetic()), o.download(ty), t);
    return;
  }
  // Any mask of the right values: 0, or the kept scale, drawn here.
  HostArray mask = o.uniform("mask", s, DType::kF32, 0, 1);
  const double keep = stored_value(1.f / (1.f - p), t);
  for (double& m : mask.v) m = m < p ? 0.0 : keep;
  const HostArray dy = o.draw("dy", s, t, 0, 1);
  Tensor tm = o.upload(mask, t, run.layout()), tdy = o.upload(dy, t, run.layout());
  Tensor tdx = o.poisoned(s, t, run.layout());
  run.execute([&] { be.dropout_backward(tdy, tm, tdx); });
  if (run.comparing())
    run.compare("dx", ref_multiply(dy, mask, run.arithmetic()), o.download(tdx), t);
}

void run_add(PassRun& run) {
  Operands& o = run.operands();
  const DType t = run.policy().activations;
  const HostArray a = o.draw("a", run.op().in, t, 0, 1), b = o.draw("b", run.op().in, t, 0, 1);
  Tensor ta = o.upload(a, t, run.layout()), tb = o.upload(b, t, run.layout());
  Backend& be = run.backend();
  if (run.pass() == CheckPass::kForward) {
    Tensor ty = o.poisoned(a.shape, t, run.layout());
    run.execute([&] { be.add(ta, tb, ty); });
    if (run.comparing()) run.compare("y", ref_add(a, b, run.arithmetic()), o.download(ty), t);
    return;
  }
  // accumulate: b += a; in perf mode b grows a little each run, which does not change its time.
  run.execute([&] { be.accumulate(ta, tb); });
  if (run.comparing()) run.compare("y", ref_add(a, b, run.arithmetic()), o.download(tb), t);
}

}  // namespace dlb
