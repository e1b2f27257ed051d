#!/usr/bin/env python3
"""PyTorch beside dlbench on the same machine, for scripts/device-check.sh (GPU) and
scripts/cpu-vs-pytorch.sh (CPU): torchvision's model on synthetic data with dlbench's settings
(SGD with momentum 0.9, lr 0.01, no weight decay, NCHW, fp32 strict or TF32; fp16 and bf16 as
PyTorch's own mixed precision: autocast, channels_last, and a GradScaler for fp16), timed as
dlbench times: warm-up steps, then timed steps. On the GPU the steps are marked by CUDA events on
the stream with no host synchronisation between them, the device synchronised at the start and
the end; on the CPU, where every op is synchronous, by the host clock. Prints one JSON object:
images per second and the median step time.

usage: torch_bench.py MODEL BATCH IMAGE_SIZE PRECISION [--steps N] [--warmup N]
                      [--device cuda|cpu]
"""
import argparse
import json
import os
import statistics
import time

import torch
import torchvision


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("batch", type=int)
    ap.add_argument("image_size", type=int)
    ap.add_argument("precision", choices=["fp32", "tf32", "fp16", "bf16"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    a = ap.parse_args()
    cpu = a.device == "cpu"
    if cpu:
        # Every core this process may use, as dlbench uses them: PyTorch's own default can be
        # fewer (here: 1 of 2, from its count of physical cores).
        torch.set_num_threads(len(os.sched_getaffinity(0)))
    if cpu and a.precision != "fp32":
        ap.error("--device=cpu times fp32 only (dlbench's CPU 16-bit runs store, not compute, "
                 "in 16 bits, which is not what PyTorch's CPU autocast does)")
    tf32 = a.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    dev = torch.device(a.device)
    torch.manual_seed(0)
    model = getattr(torchvision.models, a.model)(weights=None, num_classes=1000).to(dev).train()
    x = torch.randn(a.batch, 3, a.image_size, a.image_size, device=dev)
    y = torch.randint(0, 1000, (a.batch,), device=dev)
    half = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.precision)
    if half is not None:  # AMP as its documentation recommends for convolutional networks
        model = model.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.cuda.amp.GradScaler(enabled=a.precision == "fp16" and not cpu)

    def step():
        opt.zero_grad(set_to_none=True)
        if half is None:
            loss = torch.nn.functional.cross_entropy(model(x), y)
        else:
            with torch.autocast(a.device, dtype=half):
                loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    for _ in range(a.warmup):
        step()
    if cpu:
        marks = [time.perf_counter()]
        for _ in range(a.steps):
            step()
            marks.append(time.perf_counter())
        times = [marks[i + 1] - marks[i] for i in range(a.steps)]
        total = marks[-1] - marks[0]
        print(json.dumps({"system": "pytorch", "torch": torch.__version__, "device": "cpu",
                          "threads": torch.get_num_threads(), "model": a.model,
                          "batch": a.batch, "image_size": a.image_size,
                          "precision": a.precision, "img_s": a.batch * a.steps / total,
                          "step_median_s": statistics.median(times)}))
        return
    torch.cuda.synchronize()
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(a.steps + 1)]
    marks[0].record()
    for i in range(a.steps):
        step()
        marks[i + 1].record()
    torch.cuda.synchronize()
    times = [marks[i].elapsed_time(marks[i + 1]) / 1e3 for i in range(a.steps)]
    total = marks[0].elapsed_time(marks[-1]) / 1e3
    print(json.dumps({"system": "pytorch", "torch": torch.__version__,
                      "cudnn": torch.backends.cudnn.version(), "model": a.model,
                      "batch": a.batch, "image_size": a.image_size, "precision": a.precision,
                      "img_s": a.batch * a.steps / total, "step_median_s": statistics.median(times),
                      "peak_bytes": torch.cuda.max_memory_allocated()}))

if __name__ == "__main__":
    main()
