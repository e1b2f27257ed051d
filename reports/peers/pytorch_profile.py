"""PyTorch's training step under torch.profiler, for the device check's triage: the same step the
peer times (reports/peers/pytorch_train.py's Run: torchvision's model, SGD, AMP with channels_last
for 16 bits), `--warmup` steps untimed, then `--steps` steps profiled. Writes into --out:

  pytorch-ops.csv      time by operator (torch.profiler's key averages): name, calls, host
                       microseconds, device microseconds
  pytorch-kernels.csv  time by GPU kernel: name, launches, device microseconds
  pytorch-trace.json   the Chrome trace
  pytorch-profile.json the step: model, batch, precision, steps profiled, the median step's
                       milliseconds (CUDA events, outside the profiler), images/s, peak memory

usage: pytorch_profile.py --model=resnet50 --batch=256 --image-size=224 --precision=bf16
                          [--warmup=2 --steps=3 --backend=cuda|cpu] --out=DIR
(--backend=cpu: the same files from the CPU, whose kernel table is empty; tests run it so.)
Exit 2 for bad arguments, 4 where there is no CUDA device or PyTorch, 1 if the step fails.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_train  # noqa: E402  (the peer's own step)


def device_us(e) -> float:
    """An event's device time: `device_time_total` in current PyTorch, `cuda_time_total` before."""
    for name in ("device_time_total", "cuda_time_total"):
        v = getattr(e, name, None)
        if v is not None:
            return float(v)
    return 0.0


def write_ops(prof, path: str) -> None:
    rows = sorted(prof.key_averages(), key=device_us, reverse=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["name", "calls", "host_us", "device_us"])
        for e in rows:
            w.writerow([e.key, e.count, f"{e.cpu_time_total:.1f}", f"{device_us(e):.1f}"])


def write_kernels(prof, torch, path: str) -> None:
    """Kernels: the profiler's events on the device, summed by name."""
    cuda = torch.autograd.DeviceType.CUDA
    by_name: dict[str, list[float]] = {}
    for e in prof.events():
        if getattr(e, "device_type", None) != cuda:
            continue
        t = by_name.setdefault(e.name, [0, 0.0])
        t[0] += 1
        t[1] += float(getattr(e, "device_time", None) or getattr(e, "cuda_time", 0.0) or 0.0)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["name", "launches", "device_us"])
        for name, (n, us) in sorted(by_name.items(), key=lambda kv: -kv[1][1]):
            w.writerow([name, n, f"{us:.1f}"])


def step_ms(run, torch, steps: int) -> list[float]:
    """Each step's milliseconds between CUDA events, the device synchronised at the end (on the
    CPU, the host's clock)."""
    if not run.cuda:
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            run.step()
            times.append((time.perf_counter() - t0) * 1e3)
        return times
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
    marks[0].record()
    for i in range(steps):
        run.step()
        marks[i + 1].record()
    torch.cuda.synchronize()
    return [marks[i].elapsed_time(marks[i + 1]) for i in range(steps)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, choices=pytorch_train.TORCHVISION_MODELS)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--image-size", type=int, required=True)
    ap.add_argument("--precision", default="bf16", choices=["fp32", "tf32", "fp16", "bf16"])
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--backend", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if min(a.batch, a.image_size, a.steps) < 1 or a.warmup < 0:
        ap.error("--batch, --image-size and --steps must be >= 1, --warmup >= 0")
    if not os.path.isdir(a.out):
        ap.error(f"--out {a.out}: not a directory")
    try:
        import torch
        import torchvision
    except ImportError as e:
        print(f"pytorch_profile: PyTorch is not installed for {sys.executable}: {e}", file=sys.stderr)
        return 4
    cuda = a.backend == "cuda"
    if cuda and not torch.cuda.is_available():
        print("pytorch_profile: no CUDA device is visible to PyTorch", file=sys.stderr)
        return 4
    c = dict(pytorch_train.dlbench_defaults(), model=a.model, batch=a.batch,
             image_size=a.image_size, precision=a.precision, backend=a.backend, ranks=1)
    run = pytorch_train.Run(c, torch, torchvision)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    for _ in range(a.warmup):
        run.step()
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    timed = step_ms(run, torch, a.steps)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(a.steps):
            run.step()
        sync()
    write_ops(prof, os.path.join(a.out, "pytorch-ops.csv"))
    write_kernels(prof, torch, os.path.join(a.out, "pytorch-kernels.csv"))
    prof.export_chrome_trace(os.path.join(a.out, "pytorch-trace.json"))
    median = statistics.median(timed)
    summary = {"model": a.model, "batch": a.batch, "image_size": a.image_size,
               "precision": a.precision, "steps": a.steps, "step_ms": timed,
               "median_step_ms": median, "img_s": a.batch / (median / 1e3),
               "peak_bytes": torch.cuda.max_memory_allocated() if cuda else None,
               "torch": torch.__version__,
               "cudnn": torch.backends.cudnn.version()}
    with open(os.path.join(a.out, "pytorch-profile.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
