// The op checker's runners of the loss and of the update: softmax cross-entropy (logits in the
// activations' type, probabilities and loss in f32, as the trainer keeps them) and SGD on one
// parameter (f32 master weights and momentum, gradients in the gradients' type), with fp16's
// loss-scaling passes.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "runtime/check/bounds.h"
#include "runtime/check/op_run.h"

namespace dlb {
namespace {

// Torch's SGD defaults as dlbench trains (the option table's lr and momentum) with weight decay.
const SgdConfig kSgd{0.01f, 0.9f, 1e-4f};
constexpr double kScale = 1024.0;  // a loss scale with an exact inverse

// The scaler's four floats (backend.h's LossScaleSlot), as f32 holds them.
HostArray scaler_values(double scale, double found_inf, double clean, double skipped) {
  HostArray s(Shape{kLossScaleSlots});
  s.v = {scale, found_inf, clean, skipped};
  round_to(s, DType::kF32);
  return s;
}

Tensor scaler_state(Operands& o, double scale, double found_inf, double clean, double skipped) {
  return o.upload(scaler_values(scale, found_inf, clean, skipped), DType::kF32);
}

}  // namespace

void run_softmax_cross_entropy(PassRun& run) {
  Operands& o = run.operands();
  const DType t = run.policy().activations;
  const Shape& s = run.op().in;
  const std::vector<int64_t> labels = o.labels("labels", s[0], s[1]);
  Tensor tl = o.upload_labels(labels);
  Backend& be = run.backend();
  const Arithmetic& a = run.arithmetic();
  const HostArray z = o.draw("logits", s, t, 0, 2);
  if (run.pass() == CheckPass::kForward) {
    Tensor tz = o.upload(z, t), tp = o.poisoned(s, DType::kF32),
           tloss = o.poisoned(Shape{1}, DType::kF32);
    run.execute([&] { be.softmax_cross_entropy(tz, tl, tp, tloss); });
    if (!run.comparing()) return;
    const SoftmaxCrossEntropy want = ref_softmax_cross_entropy(z, labels, a);
    run.compare("probs", want.probs, o.download(tp), DType::kF32);
    run.compare("loss", want.loss, o.download(tloss), DType::kF32);
    return;
  }
  HostArray probs = ref_softmax_cross_entropy(z, labels, a).probs.want;
  round_to(probs, DType::kF32);
  Tensor tp = o.upload(probs, DType::kF32), tg = o.poisoned(s, t);
  const bool scaled = run.pass() == CheckPass::kBackwardScaled;
  Tensor state = scaler_state(o, kScale, 0, 0, 0);
  run.execute([&] {
    if (scaled) {
      be.softmax_cross_entropy_backward_scaled(tp, tl, state, tg);
    } else {
      be.softmax_cross_entropy_backward(tp, tl, tg);
    }
  });
  if (run.comparing()) {
    run.compare("dlogits",
                ref_softmax_cross_entropy_backward(probs, labels, scaled ? kScale : 1, a),
                o.download(tg), t);
  }
}

namespace {

// An update is elementwise: its operands are drawn, uploaded and compared a slice at a time, so
// vgg16's 103-million-weight classifier never sits in float64 whole.
constexpr int64_t kSgdSlice = int64_t{1}
                              << 16;  // cache-sized: its arrays are reused, not faulted in

struct SgdTensors {
  Tensor grad, momentum, param;
};

SgdTensors sgd_tensors(PassRun& run) {
  Operands& o = run.operands();
  const PrecisionPolicy& pol = run.policy();
  const Shape& s = run.op().in;
  return {o.upload_drawn("grad", s, pol.gradients, 0, 1),
          o.upload_drawn("momentum", s, pol.optimizer_state, 0, 1),
          o.upload_drawn("param", s, pol.master_weights, 0, 1)};
}

// The reference of elements [begin, begin + count), against the tensors as the update left them.
void compare_sgd_slice(PassRun& run, const SgdTensors& t, const Tensor* copy, double inv_scale,
                       int64_t begin, int64_t count) {
  Operands& o = run.operands();
  const PrecisionPolicy& pol = run.policy();
  const Shape& s = run.op().in;
  const SgdStep want = ref_sgd(kSgd, o.draw_slice("grad", s, pol.gradients, 0, 1, begin, count),
                               o.draw_slice("momentum", s, pol.optimizer_state, 0, 1, begin, count),
                               o.draw_slice("param", s, pol.master_weights, 0, 1, begin, count),
                               inv_scale, run.arithmetic());
  run.compare("momentum", want.momentum, o.download_slice(t.momentum, begin, count),
              pol.optimizer_state, begin);
  run.compare("param", want.param, o.download_slice(t.param, begin, count), pol.master_weights,
              begin);
  if (copy) {
    run.compare("compute copy", want.param, o.download_slice(*copy, begin, count),
                pol.compute_weights, begin);
  }
}

// After an overflow the update is skipped: nothing moves, to the bit.
void check_skipped(PassRun& run, const Tensor& grad, bool copy) {
  Operands& o = run.operands();
  const PrecisionPolicy& pol = run.policy();
  const Shape& s = run.op().in;
  Tensor m = o.upload_drawn("momentum", s, pol.optimizer_state, 0, 1);
  Tensor p = o.upload_drawn("param", s, pol.master_weights, 0, 1);
  Tensor skip = scaler_state(o, kScale, 1, 0, 0);
  // The copy as the step before left it: the parameter, rounded (a skipped step may leave it).
  Tensor c = copy ? o.upload_drawn("param", s, pol.compute_weights, 0, 1) : Tensor();
  if (copy) {
    run.backend().sgd_update_with_copy(kSgd, grad, &skip, m, p, c);
  } else {
    run.backend().sgd_update_unscaled(kSgd, grad, skip, m, p);
  }
  for (int64_t begin = 0; begin < s.numel(); begin += kSgdSlice) {
    const int64_t count = std::min(kSgdSlice, s.numel() - begin);
    run.compare_exact("momentum (skipped)",
                      o.draw_slice("momentum", s, pol.optimizer_state, 0, 1, begin, count),
                      o.download_slice(m, begin, count), begin);
    run.compare_exact("param (skipped)",
                      o.draw_slice("param", s, pol.master_weights, 0, 1, begin, count),
                      o.download_slice(p, begin, count), begin);
    if (copy) {  // still the parameter, rounded to the compute type
      HostArray rounded = o.draw_slice("param", s, pol.master_weights, 0, 1, begin, count);
      round_to(rounded, pol.compute_weights);
      run.compare_exact("compute copy (skipped)", rounded, o.download_slice(c, begin, count),
                        begin);
    }
  }
}

// The tensor's rows (its first dimension) in up to three parts, as views: the update is checked
// as a group of parameters, which a backend may update in one pass (Backend::sgd_update_group;
// the CUDA backend's table of slots, whose boundaries a part's first element then crosses).
std::vector<Tensor> row_parts(const Tensor& t) {
  const int64_t rows = t.shape()[0], per_row = rows > 0 ? t.numel() / rows : 0;
  const int64_t parts = std::min<int64_t>(3, rows);
  std::vector<Tensor> out;
  for (int64_t k = 0; k < parts; ++k) {
    const int64_t first = rows * k / parts, end = rows * (k + 1) / parts;
    Shape s = t.shape();
    s[0] = end - first;
    out.push_back(t.slice_flat(first * per_row, s.numel()).reshaped(s).with_layout(t.layout()));
  }
  return out;
}

// As Optimizer::update_range, over the parameter in three parts: a parameter with a compute
// copy (conv, linear) in a 16-bit run through sgd_update_with_copy's path, one without in fp16
// through sgd_update_unscaled's, otherwise sgd_update's; fp16 divides by the loss scale and moves
// nothing after an overflow.
void sgd_update(PassRun& run) {
  Operands& o = run.operands();
  const PrecisionPolicy& pol = run.policy();
  SgdTensors t = sgd_tensors(run);
  const bool copy = run.op().copy && pol.compute_weights != pol.master_weights;
  const bool scaled = run.policy().activations == DType::kF16;
  Tensor c = copy ? o.poisoned(run.op().in, pol.compute_weights) : Tensor();
  Tensor state = scaler_state(o, kScale, 0, 0, 0);
  run.set_work(0, 4.0 * static_cast<double>(t.param.bytes()));
  std::vector<Tensor> grads = row_parts(t.grad), moms = row_parts(t.momentum),
                      params = row_parts(t.param), copies = copy ? row_parts(c) : moms;
  std::vector<SgdParamRef> group;
  for (size_t k = 0; k < grads.size(); ++k) {
    group.push_back({&grads[k], &moms[k], &params[k], copy ? &copies[k] : nullptr});
  }
  run.execute([&] { run.backend().sgd_update_group(kSgd, group, scaled ? &state : nullptr); });
  if (!run.comparing()) return;
  const int64_t n = run.op().in.numel();
  for (int64_t begin = 0; begin < n; begin += kSgdSlice) {
    compare_sgd_slice(run, t, copy ? &c : nullptr, scaled ? 1 / kScale : 1, begin,
                      std::min(kSgdSlice, n - begin));
  }
  if (scaled) check_skipped(run, t.grad, copy);
}

// The found-inf slot: clear after clean gradients, set by one inf and by one NaN.
void loss_scale_find_non_finite(PassRun& run) {
  Operands& o = run.operands();
  const DType t = run.policy().gradients;
  Tensor g = o.upload_drawn("grad", run.op().in, t, 0, 1);
  const auto found = [&] {
    Tensor state = scaler_state(o, kScale, 0, 0, 0);
    run.execute([&] { run.backend().find_non_finite(g, state); });
    return o.download(state).v[kFoundInfSlot];
  };
  if (found() != 0 && run.comparing()) run.fail("clean gradients were found not finite");
  if (!run.comparing()) return;  // perf: the check of clean gradients, timed
  Tensor planted = g.slice_flat(g.numel() / 2, 1);
  for (double v :
       {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    HostArray one(Shape{1});
    one.v[0] = v;
    o.upload_into(one, planted);
    if (found() != 1) run.fail(fmt::format("one {} among the gradients was not found", v));
  }
}

// GradScaler's rule on states that take each branch: an overflow, a clean step, the clean step
// that grows the scale, and a growth that would overflow f32.
void loss_scale_update(PassRun& run) {
  Operands& o = run.operands();
  const LossScaleConfig cfg{65536.f, 2.f, 0.5f, 3};
  const std::vector<std::vector<double>> states = {
      {kScale, 1, 1, 0}, {kScale, 0, 0, 2}, {kScale, 0, 2, 0}, {3e38, 0, 2, 0}};
  for (const std::vector<double>& s : states) {
    const HostArray before = scaler_values(s[0], s[1], s[2], s[3]);
    Tensor t = o.upload(before, DType::kF32);
    run.execute([&] { run.backend().update_loss_scale(cfg, t); });
    if (!run.comparing()) return;  // perf: timed runs moved the state on
    HostArray want(before.shape);
    want.v = ref_loss_scale_update(cfg, before.v);
    round_to(want, DType::kF32);
    run.compare_exact(fmt::format("state after {{{}, {}, {}, {}}}", s[0], s[1], s[2], s[3]), want,
                      o.download(t));
  }
}

}  // namespace

void run_sgd(PassRun& run) { sgd_update(run); }

void run_loss_scale(PassRun& run) {
  if (run.pass() == CheckPass::kFindNonFinite) return loss_scale_find_non_finite(run);
  loss_scale_update(run);
}

}  // namespace dlb
