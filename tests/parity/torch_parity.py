#!/usr/bin/python3
"""Parity of dlbench against PyTorch: torchvision's resnet18 from the same random weights and
batch, trained for SGD steps (momentum and weight decay on) in both. Compares the losses and
every updated weight and batch-norm buffer. Exits 1 on a mismatch.

Gradients are discontinuous at ReLU's kink: a pre-activation within float32 rounding of zero
(seen: 2.3e-6) can take opposite sides in two correct f32 implementations that sum in different
orders, and one flipped mask entry moves a batch-norm bias gradient by 20%. So the data is drawn
from the first seed whose every ReLU input, in every step, is at least --margin away from zero,
as PyTorch computes it; the margin found is printed.

Two steps at batch 4 and 32x32 are ill-conditioned (layer4's batch norm sees 4 values): there
PyTorch's own float32 result is 1e-1 away from float64, as far as dlbench's. The defaults (one
step, batch 4, 48x48) are well-conditioned; both frameworks agree with float64 to ~1e-5.

On a GPU machine, --backend=cuda runs dlbench's CUDA backend and --torch-device=cuda runs
PyTorch on the GPU, both in strict fp32 (PyTorch's TF32 switches off): the same tolerances hold,
since each still agrees with float64 to ~1e-5.

With --precision=bf16, dlbench's bf16 (16-bit activations and gradients, f32 master weights)
is compared with PyTorch's autocast-bf16 (torch.autocast, the loss in float32) from the same
weights and batch. Two bf16 pipelines round at different places, so they are not compared with
each other at a fixed tolerance: each is compared with PyTorch's own float32 step, and dlbench's
distance from it (the loss; the update over all parameters, relative, in the 2-norm) must be
within twice PyTorch's bf16 distance. Two pipelines that round the same tensors to the same
type make errors of the same size; twice allows for which one a given seed happens to favour.
Master weights kept in bf16, or a gradient computed from the wrong tensor, land far above. The
update's distance, a sum over 11 million weights, is stable from seed to seed (measured: within
10% of PyTorch's), so it must also be at least a quarter of PyTorch's: a run that silently
stayed in f32, or skipped most roundings, lands far below.

With --peer, the PyTorch peer that sweeps run beside dlbench (reports/peers/pytorch_train.py,
given the same weights and batch through its point file) trains the same steps, and its losses
must match dlbench's at --tol: the peer trains the model that dlbench trains.

usage: torch_parity.py DLBENCH WORKDIR [--steps N] [--image-size S] [--batch B] [--tol T]
                       [--backend cpu|cuda] [--torch-device cpu|cuda] [--precision fp32|bf16]
                       [--conv-algo heuristic|autotune|im2col|onednn] [--peer]
"""
import argparse
import json
import os
import subprocess
import sys

import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402


def train_torch(a, seed, bf16=False):
    """Trains torchvision's model in PyTorch (in autocast-bf16 when asked); returns it, the data,
    the initial state, the losses and the smallest |input| any ReLU saw."""
    torch.manual_seed(seed)
    model = getattr(torchvision.models, a.model)(weights=None, num_classes=1000)
    device = torch.device(a.torch_device)
    margin = [float("inf")]

    def watch(_module, inputs):
        margin[0] = min(margin[0], inputs[0].detach().abs().min().item())

    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):  # dropout draws differ between frameworks
            m.p = 0.0
        if isinstance(m, torch.nn.ReLU):
            m.register_forward_pre_hook(watch)
    model.train()
    images = torch.randn(a.batch, 3, a.image_size, a.image_size)
    labels = torch.randint(0, 1000, (a.batch,), dtype=torch.int64)
    init = {k: v.clone() for k, v in model.state_dict().items()}
    model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum,
                          weight_decay=a.weight_decay)
    losses = []
    for _ in range(a.steps):
        opt.zero_grad()
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(images.to(device))
        loss = torch.nn.functional.cross_entropy(logits.float(), labels.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.to("cpu")
    return model, images, labels, init, losses, margin[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dlbench")
    ap.add_argument("workdir")
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--image-size", type=int, default=48)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=1e-4)
    ap.add_argument("--tol", type=float, default=1e-4, help="loss and weights, relative")
    ap.add_argument("--update-tol", type=float, default=1e-2,
                    help="the update (weights after minus before), relative: tests gradients")
    ap.add_argument("--seed", type=int, default=1234, help="first seed tried")
    ap.add_argument("--margin", type=float, default=1e-5)
    ap.add_argument("--backend", default="cpu", help="dlbench's backend")
    ap.add_argument("--conv-algo", default="heuristic",
                    help="dlbench's --conv-algo (cpu: im2col or onednn for every convolution)")
    ap.add_argument("--torch-device", default="cpu", help="where PyTorch trains")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--peer", action="store_true",
                    help="also train with reports/peers/pytorch_train.py; its losses must match")
    a = ap.parse_args()
    # Strict fp32 on a GPU: no TF32 in PyTorch's convolutions or matrix products.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.makedirs(a.workdir, exist_ok=True)

    for seed in range(a.seed, a.seed + 500):
        model, images, labels, init, torch_losses, margin = train_torch(a, seed)
        if margin >= a.margin:
            break
    else:
        print(f"no seed in [{a.seed}, {a.seed + 500}) keeps ReLU inputs {a.margin} from zero")
        return 1
    print(f"seed {seed}: smallest |ReLU input| over {a.steps} steps is {margin:.2e}")
    init_path = os.path.join(a.workdir, "init.safetensors")
    batch_path = os.path.join(a.workdir, "batch.safetensors")
    out_path = os.path.join(a.workdir, "out.safetensors")
    rec_path = os.path.join(a.workdir, "record.json")
    safetensors_io.save(init_path, init)
    safetensors_io.save(batch_path, {"images": images, "labels": labels})

    cmd = [a.dlbench, "run", f"--model={a.model}", f"--init={init_path}",
           f"--batch-file={batch_path}", f"--steps={a.steps}", "--warmup=0", f"--lr={a.lr}",
           f"--momentum={a.momentum}", f"--weight-decay={a.weight_decay}", "--dropout=0",
           f"--save={out_path}", f"--json={rec_path}", f"--backend={a.backend}",
           f"--precision={a.precision}", f"--conv-algo={a.conv_algo}"]
    subprocess.run(cmd, check=True)
    if a.precision == "bf16":
        return compare_bf16(a, seed, model, init, torch_losses, rec_path, out_path)

    with open(rec_path) as f:
        dlb_losses = json.load(f)["metrics"]["losses"]
    got = safetensors_io.load(out_path)
    want = model.state_dict()
    failures = peer_failures(a, init_path, batch_path, dlb_losses) if a.peer else []
    if sorted(got) != sorted(want):
        failures.append(f"names differ: only dlbench {sorted(set(got) - set(want))[:5]}, "
                        f"only torch {sorted(set(want) - set(got))[:5]}")
    for i, (d, t) in enumerate(zip(dlb_losses, torch_losses)):
        rel = abs(d - t) / abs(t)
        print(f"loss step {i + 1}: dlbench {d:.7f} torch {t:.7f} rel {rel:.2e}")
        if rel > a.tol:
            failures.append(f"loss step {i + 1} differs by {rel:.2e}")
    worst, worst_update = (0.0, ""), (0.0, "")
    for name in sorted(set(got) & set(want)):
        g, w = got[name], want[name]
        if g.shape != w.shape or g.dtype != w.dtype:
            failures.append(f"{name}: {g.dtype}{list(g.shape)} vs {w.dtype}{list(w.shape)}")
            continue
        if g.dtype == torch.int64:
            if not torch.equal(g, w):
                failures.append(f"{name}: {g.tolist()} vs {w.tolist()}")
            continue
        # Relative to the tensor's largest magnitude: element-wise relative error is meaningless
        # for entries near zero.
        rel = ((g - w).abs().max() / w.abs().max().clamp_min(1e-12)).item()
        if rel > worst[0]:
            worst = (rel, name)
        if rel > a.tol:
            failures.append(f"{name}: relative difference {rel:.2e}")
        # The update itself (weights after minus before), a far more sensitive test of gradients.
        dw, dt = g - init[name], w - init[name]
        if dt.abs().max() > 0:
            rel_u = ((dw - dt).abs().max() / dt.abs().max()).item()
            if rel_u > worst_update[0]:
                worst_update = (rel_u, name)
            if rel_u > a.update_tol:
                failures.append(f"{name}: update differs by {rel_u:.2e}")
    print(f"{len(want)} tensors compared; worst weight difference {worst[0]:.2e} ({worst[1]}); "
          f"worst update difference {worst_update[0]:.2e} ({worst_update[1]})")
    # Reverse direction: dlbench's file loads into torchvision strictly.
    model.load_state_dict(got, strict=True)
    if failures:
        print("PARITY FAILED:\n  " + "\n  ".join(failures[:20]))
        return 1
    print(f"parity ok (dlbench {a.backend}, PyTorch {torch.__version__} on {a.torch_device})")
    return 0


def peer_failures(a, init_path, batch_path, dlb_losses):
    """Runs the PyTorch peer on dlbench's weights and batch, as the harness would (a point
    file); returns the steps whose loss differs from dlbench's by more than --tol."""
    here = os.path.dirname(os.path.abspath(__file__))
    peer = os.path.join(here, "..", "..", "reports", "peers", "pytorch_train.py")
    point = os.path.join(a.workdir, "peer_point.json")
    record = os.path.join(a.workdir, "peer_record.json")
    config = {"system": "pytorch", "model": a.model, "batch": a.batch,
              "image_size": a.image_size, "num_classes": 1000, "precision": a.precision,
              "backend": "cuda" if a.torch_device == "cuda" else "cpu", "steps": a.steps,
              "warmup": 0, "lr": a.lr, "momentum": a.momentum, "weight_decay": a.weight_decay,
              "dropout": 0.0, "seed": 0, "ranks": 1, "data": "batch-file",
              "init": init_path, "batch_file": batch_path}
    with open(point, "w") as f:
        json.dump({"resolved": config, "record": record}, f)
    subprocess.run([sys.executable, peer, f"--point={point}"], check=True)
    with open(record) as f:
        rec = json.load(f)
    if rec["status"] != "ok":
        return [f"peer: {rec['status']}: {rec.get('message')}"]
    failures = []
    for i, (p, d) in enumerate(zip(rec["metrics"]["losses"], dlb_losses)):
        rel = abs(p - d) / abs(d)
        print(f"loss step {i + 1}: PyTorch peer {p:.7f} dlbench {d:.7f} rel {rel:.2e}")
        if rel > a.tol:
            failures.append(f"peer loss step {i + 1} differs from dlbench's by {rel:.2e}")
    return failures


def update_distance(state, reference, init):
    """|| update - reference update ||_2 / || reference update ||_2 over every float tensor."""
    num = den = 0.0
    for name, ref in reference.items():
        if not ref.dtype.is_floating_point:
            continue
        du = state[name].double() - init[name].double()
        dr = ref.double() - init[name].double()
        num += (du - dr).pow(2).sum().item()
        den += dr.pow(2).sum().item()
    return (num / den) ** 0.5


def compare_bf16(a, seed, fp32_model, init, fp32_losses, rec_path, out_path):
    bf16_model, _, _, _, bf16_losses, _ = train_torch(a, seed, bf16=True)
    with open(rec_path) as f:
        record = json.load(f)
    dlb_losses = record["metrics"]["losses"]
    got = safetensors_io.load(out_path)
    ref = fp32_model.state_dict()
    failures = []
    if record["config"]["precision"] != "bf16":
        failures.append(f"dlbench ran {record['config']['precision']}, not bf16")
    for i, (d, t, f) in enumerate(zip(dlb_losses, bf16_losses, fp32_losses)):
        dd, dt = abs(d - f) / abs(f), abs(t - f) / abs(f)
        print(f"loss step {i + 1}: fp32 {f:.6f}; PyTorch bf16 {t:.6f} ({dt:.2e} from it); "
              f"dlbench bf16 {d:.6f} ({dd:.2e})")
        if dd > 2 * dt:
            failures.append(f"loss step {i + 1}: dlbench {dd:.2e} from fp32, PyTorch {dt:.2e}")
    ud = update_distance(got, ref, init)
    ut = update_distance(bf16_model.state_dict(), ref, init)
    print(f"update, relative to fp32's (2-norm over all parameters): PyTorch bf16 {ut:.2e}, "
          f"dlbench bf16 {ud:.2e}")
    if ud > 2 * ut or ud < ut / 4:
        failures.append(f"update: dlbench {ud:.2e} from fp32, PyTorch {ut:.2e} (want within "
                        f"[{ut / 4:.2e}, {2 * ut:.2e}])")
    # The running statistics and batch counts are f32 and int64 in both, with the same names.
    if sorted(got) != sorted(ref):
        failures.append("state names differ")
    if failures:
        print("PARITY FAILED:\n  " + "\n  ".join(failures))
        return 1
    print(f"bf16 parity ok (dlbench {a.backend}, PyTorch {torch.__version__} autocast on "
          f"{a.torch_device})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
