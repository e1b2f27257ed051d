#!/usr/bin/python3
"""Model-level parity, pass by pass: one SGD step of a torchvision model in dlbench (fp32, the CPU
backend and the --conv-algo given), from PyTorch's initial weights and batch, with every tensor of
the step dumped (dlbench run --dump). Each pass is then recomputed by PyTorch in float64 from the
inputs dlbench itself gave it (teacher forcing), and every element of its outputs must be within
the op checker's bound (runtime/check/bounds.h; dlbench check-ops): a reduction of K terms may be
off by c·sqrt(K)·u·Σ|aᵢ||bᵢ| (Σ|aᵢ||bᵢ| is the same op on magnitudes), elementwise work by a few
units of roundoff of what it combines, and each stored result by its rounding. The update is
checked the same way, from dlbench's gradients.

Why pass by pass: a whole step compared with float64 end to end mixes two things. A ReLU input
within rounding of zero takes either side in two correct fp32 implementations, and one flipped
decision moves a batch-norm bias gradient by percents; that is not an error of either, and no
tolerance from the arithmetic allows it. So the end-to-end distances are printed (dlbench's and
PyTorch fp32's from PyTorch float64), with the ReLU decisions of dlbench's step that float64 takes
the other way and how close to zero each was, but they are not judged.

usage: model_parity.py DLBENCH WORKDIR --model M --image-size S [--batch B] [--conv-algo A]
                       [--seed N]
"""
import argparse
import copy
import json
import math
import os
import subprocess
import sys

import torch
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

U = 2.0 ** -24  # f32's unit roundoff: fp32 products, sums and stores
LR, MOMENTUM, WD = 0.01, 0.9, 1e-4


class Judge:
    """Compares outputs with references within bounds; keeps the worst ratio per tensor."""

    def __init__(self, c, ulps):
        self.c, self.ulps = c, ulps
        self.results = []  # (ratio, name, index, got, want, bound)

    def reduction(self, k, magnitude):
        return self.c * math.sqrt(k) * U * magnitude

    def check(self, name, got, want, bound):
        got, want = got.double(), want.double()
        if got.shape != want.shape:
            self.results.append((math.inf, name, -1, got.shape, want.shape, 0))
            return
        bound = bound + U * want.abs() + 2.0 ** -150  # the store into f32
        diff = (got - want).abs()
        ratio = torch.where(diff == 0, torch.zeros_like(diff), diff / bound)
        ratio = torch.where(torch.isnan(diff), torch.full_like(diff, math.inf), ratio)
        i = int(ratio.flatten().argmax())
        self.results.append((float(ratio.flatten()[i]), name, i, float(got.flatten()[i]),
                             float(want.flatten()[i]), float(bound.flatten()[i])))


def conv_args(m):
    return dict(stride=m.stride, padding=m.padding, groups=m.groups)


def check_conv(j, m, name, x, w, b, y, dy, grads, contrib):
    a = conv_args(m)
    k = w.shape[1] * w.shape[2] * w.shape[3]
    ref = F.conv2d(x, w, None, **a)
    bound = j.reduction(k, F.conv2d(x.abs(), w.abs(), None, **a))
    if b is not None:
        bound = bound + j.ulps * U * (ref.abs() + b.abs().view(1, -1, 1, 1))
        ref = ref + b.view(1, -1, 1, 1)
    j.check(name, y, ref, bound)
    stride = m.stride[0]
    windows = math.ceil(w.shape[2] / stride) * math.ceil(w.shape[3] / stride)
    dx = torch.nn.grad.conv2d_input(x.shape, w, dy, **a)
    dxm = torch.nn.grad.conv2d_input(x.shape, w.abs(), dy.abs(), **a)
    contrib.append((dx, j.reduction(w.shape[0] // m.groups * windows, dxm)))
    dw = torch.nn.grad.conv2d_weight(x, w.shape, dy, **a)
    dwm = torch.nn.grad.conv2d_weight(x.abs(), w.shape, dy.abs(), **a)
    npix = dy.shape[0] * dy.shape[2] * dy.shape[3]
    j.check(name + ".weight.grad", grads[name + ".weight.grad"], dw, j.reduction(npix, dwm))
    if b is not None:
        j.check(name + ".bias.grad", grads[name + ".bias.grad"], dy.sum((0, 2, 3)),
                j.reduction(npix, dy.abs().sum((0, 2, 3))))


def check_linear(j, name, x, w, b, y, dy, grads, contrib):
    prod = x @ w.t()
    bound = j.reduction(x.shape[1], x.abs() @ w.abs().t())
    bound = bound + U * prod.abs() + j.ulps * U * (prod.abs() + b.abs())
    j.check(name, y, prod + b, bound)
    contrib.append((dy @ w, j.reduction(w.shape[0], dy.abs() @ w.abs())))
    j.check(name + ".weight.grad", grads[name + ".weight.grad"], dy.t() @ x,
            j.reduction(x.shape[0], dy.abs().t() @ x.abs()))
    j.check(name + ".bias.grad", grads[name + ".bias.grad"], dy.sum(0),
            j.reduction(x.shape[0], dy.abs().sum(0)))


def bn_stats(j, x, eps):
    dims = (0, 2, 3)
    k = x.numel() / x.shape[1]
    mean, var = x.mean(dims), x.var(dims, unbiased=False)
    mean_b = j.reduction(k, x.abs().mean(dims)) + j.ulps * U * mean.abs()
    var_b = j.reduction(k, (x * x).mean(dims)) + 2 * mean.abs() * mean_b + j.ulps * U * var
    invstd = 1 / torch.sqrt(var + eps)
    invstd_b = invstd * (var_b / (2 * (var + eps)) + j.ulps * U)
    return k, mean, var, invstd, mean_b, var_b, invstd_b


def check_batch_norm(j, m, name, x, g, beta, y, dy, dump, contrib):
    """runtime/check/reference_norm.cpp's reference and bounds, in PyTorch."""
    k, mean, var, invstd, mean_b, var_b, invstd_b = bn_stats(j, x, m.eps)
    c = lambda t: t.view(1, -1, 1, 1)  # noqa: E731
    centred = x - c(mean)
    j.check(name, y, c(g) * centred * c(invstd) + c(beta),
            c(g.abs() * invstd * mean_b) + (c(g) * centred).abs() * c(invstd_b)
            + j.ulps * U * (c(g.abs() * invstd) * (x.abs() + c(mean.abs())) + c(beta.abs())))
    j.check(name + ".saved mean", dump[name + ".saved mean"], mean, mean_b)
    j.check(name + ".saved invstd", dump[name + ".saved invstd"], invstd, invstd_b)
    rm_want, rv_want = m.momentum * mean, (1 - m.momentum) + m.momentum * var * k / (k - 1)
    j.check(name + ".running_mean", dump[name + ".running_mean"], rm_want,
            m.momentum * mean_b + j.ulps * U * rm_want.abs())
    j.check(name + ".running_var", dump[name + ".running_var"], rv_want,
            m.momentum * k / (k - 1) * var_b + j.ulps * U * rv_want.abs())
    # Backward from dlbench's own saved statistics, as the pass reads them.
    sm, si = dump[name + ".saved mean"].double(), dump[name + ".saved invstd"].double()
    xhat = (x - c(sm)) * c(si)
    dbeta, dgamma = dy.sum((0, 2, 3)), (dy * xhat).sum((0, 2, 3))
    dbeta_b = j.reduction(k, dy.abs().sum((0, 2, 3)))
    dgamma_b = j.reduction(k, (dy * xhat).abs().sum((0, 2, 3))) + j.ulps * U * (
        dy.abs() * (x.abs() + c(sm.abs())) * c(si)).sum((0, 2, 3))
    j.check(name + ".bias.grad", dump[name + ".bias.grad"], dbeta, dbeta_b)
    j.check(name + ".weight.grad", dump[name + ".weight.grad"], dgamma, dgamma_b)
    dx = c(g * si) * (dy - c(dbeta / k) - xhat * c(dgamma / k))
    dx_b = c(g.abs() * si) * (c(dbeta_b / k) + xhat.abs() * c(dgamma_b / k) + j.ulps * U * (
        dy.abs() + c(dbeta.abs() / k) + (xhat * c(dgamma)).abs() / k
        + (x.abs() + c(sm.abs())) * c(si * dgamma.abs() / k)))
    contrib.append((dx, dx_b))


def scatter_bound(j, values, counts):
    """A gradient element that k > 1 windows send to is a sum of k contributions."""
    return torch.where(counts > 1, j.c * counts.sqrt() * U * values, torch.zeros_like(values))


def check_max_pool(j, m, name, x, y, dy, contrib):
    ref, idx = F.max_pool2d(x, m.kernel_size, m.stride, m.padding, return_indices=True)
    j.check(name, y, ref, torch.zeros_like(ref))
    flat = lambda t: t.flatten(2)  # noqa: E731
    dx = torch.zeros_like(flat(x)).scatter_add_(2, flat(idx), flat(dy)).view_as(x)
    mag = torch.zeros_like(flat(x)).scatter_add_(2, flat(idx), flat(dy).abs()).view_as(x)
    counts = torch.zeros_like(flat(x)).scatter_add_(2, flat(idx), torch.ones_like(flat(dy)))
    contrib.append((dx, scatter_bound(j, mag, counts.view_as(x))))


def check_adaptive(j, m, name, x, y, dy, contrib):
    out = m.output_size if isinstance(m.output_size, tuple) else (m.output_size,) * 2
    ref = F.adaptive_avg_pool2d(x, out)
    area = max(math.ceil(x.shape[2] / out[0]) + 1, 1) * max(math.ceil(x.shape[3] / out[1]) + 1, 1)
    j.check(name, y, ref, j.reduction(area, F.adaptive_avg_pool2d(x.abs(), out))
            + j.ulps * U * ref.abs())
    xr = x.clone().requires_grad_(True)
    (F.adaptive_avg_pool2d(xr, out) * dy).sum().backward()
    xa = x.clone().requires_grad_(True)
    (F.adaptive_avg_pool2d(xa, out) * dy.abs()).sum().backward()
    ones = torch.ones_like(x, requires_grad=True)
    counts = torch.autograd.grad(F.adaptive_avg_pool2d(ones, out).sum(), ones)[0]
    # counts: Σ 1/area over the bins an element is in; at least one bin per element.
    nbins = torch.ceil(counts * area - 1e-9).clamp(min=1)
    contrib.append((xr.grad, scatter_bound(j, xa.grad, nbins) + j.ulps * U * xa.grad))


def check_loss(j, logits, labels, probs, loss, dlogits):
    n, c = logits.shape
    lse = torch.logsumexp(logits, 1, keepdim=True)
    m = logits.max(1, keepdim=True).values
    log_s = lse - m
    p = torch.exp(logits - lse)
    j.check("softmax probabilities", probs, p,
            p * (j.reduction(c, 1.0) + j.ulps * U * (1 + (logits - m).abs() + log_s.abs())))
    zl = logits.gather(1, labels.view(-1, 1))
    l = (lse - zl).squeeze(1)
    per = j.reduction(c, 1.0) + j.ulps * U * (m.abs() + log_s.abs() + zl.abs()).squeeze(1)
    j.check("loss", loss, l.mean().view(1), per.mean().view(1) + j.reduction(n, l.abs().mean()))
    onehot = F.one_hot(labels, c).double()
    pr = probs.double()
    j.check("grad of logits", dlogits, (pr - onehot) / n, j.ulps * U * (pr + onehot) / n)


def judge_step(j, model, graph, dump, init):
    """Every pass of the dumped step against PyTorch in float64, from dlbench's own inputs."""
    d = {k: v.double() if v.is_floating_point() else v for k, v in dump.items()}
    shapes = {}

    def act(name):  # a view (flatten) is its input's bytes under its own shape
        if name in d:
            return d[name]
        node = next(n for n in graph if n["name"] == name)
        return act(node["inputs"][0]).reshape(d["grad of " + name].shape
                                              if "grad of " + name in d else (shapes[name]))

    contributions = {}  # input name -> [(reference, bound)] from each consumer
    views = {}  # a view node -> (its input, the input's shape)
    for node in graph[1:]:
        name, kind, ins = node["name"], node["kind"], node["inputs"]
        xs = [act(i) for i in ins]
        y = d.get(name)
        dy = d.get("grad of " + name)
        base = name.split("#")[0]
        contrib = []
        if kind == "conv2d":
            m = model.get_submodule(base)
            b = init[base + ".bias"].double() if m.bias is not None else None
            check_conv(j, m, name, xs[0], init[base + ".weight"].double(), b, y, dy, d, contrib)
        elif kind == "linear":
            check_linear(j, name, xs[0], init[name + ".weight"].double(),
                         init[name + ".bias"].double(), y, dy, d, contrib)
        elif kind == "batch_norm":
            m = model.get_submodule(base)
            check_batch_norm(j, m, name, xs[0], init[name + ".weight"].double(),
                             init[name + ".bias"].double(), y, dy, d, contrib)
        elif kind == "relu":
            j.check(name, y, xs[0].clamp(min=0), torch.zeros_like(y))
            contrib.append((torch.where(y > 0, dy, torch.zeros_like(dy)), torch.zeros_like(dy)))
        elif kind == "max_pool2d":
            check_max_pool(j, model.get_submodule(base), name, xs[0], y, dy, contrib)
        elif kind == "adaptive_avg_pool2d":
            check_adaptive(j, model.get_submodule(base), name, xs[0], y, dy, contrib)
        elif kind == "add":
            j.check(name, y, xs[0] + xs[1], j.ulps * U * (xs[0].abs() + xs[1].abs()))
            contrib += [(dy, torch.zeros_like(dy))] * 2
        elif kind == "dropout":  # at p = 0 forward and backward copy
            j.check(name, y, xs[0], torch.zeros_like(y))
            contrib.append((dy, torch.zeros_like(dy)))
        elif kind == "flatten":  # a view: what its consumers send goes to its input, reshaped
            shapes[name] = [xs[0].shape[0], -1]
            views[name] = (ins[0], xs[0].shape)
            continue
        else:
            raise SystemExit(f"model_parity: no reference for a {kind} node ({name})")
        for i, c in zip(ins, contrib):
            contributions.setdefault(i, []).append(c)
    for view, (source, shape) in views.items():
        contributions.setdefault(source, []).extend(
            (r.reshape(shape), b.reshape(shape)) for r, b in contributions.pop(view, []))
    # A node's gradient: the sum of what its consumers send it (one add per extra consumer).
    for name, parts in contributions.items():
        if "grad of " + name not in d:
            continue
        ref = sum(r for r, _ in parts)
        bound = sum(b for _, b in parts) + (
            j.ulps * U * sum(r.abs() for r, _ in parts) if len(parts) > 1 else 0)
        j.check("grad of " + name, d["grad of " + name], ref, bound)
    out = graph[-1]["name"]
    check_loss(j, act(out), d["labels"], d["softmax probabilities"], d["loss"], d["grad of " + out])


def judge_update(j, init, grads, after):
    """torch.optim.SGD's first step from dlbench's gradients: buf = g + wd·p; p -= lr·buf."""
    for name, p in init.items():
        if not p.is_floating_point() or name + ".grad" not in grads:
            continue
        p, g = p.double(), grads[name + ".grad"].double()
        buf = g + WD * p
        buf_b = j.ulps * U * (g.abs() + (WD * p).abs())
        j.check(name + " (updated)", after[name], p - LR * buf,
                LR * buf_b + j.ulps * U * (p.abs() + (LR * buf).abs()))


def relu_inputs(model, images, dtype):
    """Every ReLU's input in a training forward of `model` in `dtype`, in call order."""
    seen = []
    # Before the module: torchvision's ReLUs work in place.
    hooks = [m.register_forward_pre_hook(lambda mod, i: seen.append(i[0].detach().clone()))
             for m in model.modules() if isinstance(m, torch.nn.ReLU)]
    with torch.no_grad():
        model.to(dtype).train()(images.to(dtype))
    for h in hooks:
        h.remove()
    return seen


def relu_flips(model, images, graph, dump):
    """The ReLU decisions that PyTorch's float64 forward (end to end) takes the other way from
    dlbench's step and from PyTorch's own fp32 forward: their counts, and how near zero the
    float64 input of dlbench's was."""
    x32 = relu_inputs(copy.deepcopy(model), images, torch.float32)
    x64 = relu_inputs(model, images, torch.float64)
    relus = [n["name"] for n in graph if n["kind"] == "relu"]
    flips = torch_flips = 0
    nearest = 0.0
    for name, a, b in zip(relus, x64, x32):
        diff = (dump[name] > 0) != (a > 0)
        torch_flips += int(((b > 0) != (a > 0)).sum())
        if diff.any():
            flips += int(diff.sum())
            nearest = max(nearest, float(a[diff].abs().max()))
    return flips, nearest, torch_flips


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dlbench")
    ap.add_argument("workdir")
    ap.add_argument("--model", required=True)
    ap.add_argument("--image-size", type=int, required=True)
    ap.add_argument("--batch", type=int, default=4)
    # The bounds here are those of sums of products: the algorithms that compute them. Winograd
    # (which the heuristic takes on large 3x3 layers) has its own, in check-ops.
    ap.add_argument("--conv-algo", default="onednn", choices=("im2col", "onednn"))
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--plant", metavar="TENSOR",
                    help="test the judge: move one element of this dumped tensor by 1%% first "
                         "(the run must then fail)")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    path = lambda f: os.path.join(a.workdir, f)  # noqa: E731
    subprocess.run([a.dlbench, "check-ops", "--backend=cpu", "--instance=relu:shape=1x1",
                    f"--json={path('bounds.json')}"], check=True, stdout=subprocess.DEVNULL)
    bounds = json.load(open(path("bounds.json")))["config"]["bounds"]
    j = Judge(bounds["c"], bounds["ulps"])

    torch.manual_seed(a.seed)
    model = getattr(torchvision.models, a.model)(weights=None, num_classes=1000)
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    init = {k: v.clone() for k, v in model.state_dict().items()}
    images = torch.randn(a.batch, 3, a.image_size, a.image_size)
    labels = torch.randint(0, 1000, (a.batch,), dtype=torch.int64)
    safetensors_io.save(path("init.safetensors"), init)
    safetensors_io.save(path("batch.safetensors"), {"images": images, "labels": labels})
    subprocess.run([a.dlbench, "run", f"--model={a.model}", f"--init={path('init.safetensors')}",
                    f"--batch-file={path('batch.safetensors')}", "--steps=1", "--warmup=0",
                    f"--lr={LR}", f"--momentum={MOMENTUM}", f"--weight-decay={WD}",
                    "--dropout=0", f"--conv-algo={a.conv_algo}", f"--dump={path('step.safetensors')}",
                    f"--save={path('after.safetensors')}"], check=True, stdout=subprocess.DEVNULL)
    dump = safetensors_io.load(path("step.safetensors"))
    if a.plant:
        flat = dump[a.plant].view(-1)
        flat[flat.numel() // 2] += 0.01 * flat[flat.numel() // 2].abs() + 1e-3
    graph = json.loads(safetensors_io.metadata(path("step.safetensors"))["dlbench.graph"])
    judge_step(j, model, graph, dump, init)
    judge_update(j, init, dump, safetensors_io.load(path("after.safetensors")))

    failed = [r for r in j.results if not r[0] <= 1]
    worst = max(j.results, key=lambda r: r[0])
    flips, nearest, torch_flips = relu_flips(model, images, graph, dump)
    print(f"{a.model} {a.image_size}px batch {a.batch} {a.conv_algo}: {len(j.results)} tensors of "
          f"the step, each pass from dlbench's own inputs against float64; worst |error|/bound "
          f"{worst[0]:.3g} ({worst[1]}); ReLU decisions float64 takes the other way: {flips}"
          + (f" (inputs within {nearest:.1e} of zero)" if flips else "")
          + f"; PyTorch fp32's: {torch_flips}")
    for r in sorted(failed, reverse=True)[:10]:
        print(f"  FAILED {r[1]}[{r[2]}]: dlbench {r[3]!r}, float64 {r[4]!r}, bound {r[5]:.3g}, "
              f"ratio {r[0]:.3g}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
