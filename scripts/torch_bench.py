#!/usr/bin/env python3
"""PyTorch beside dlbench on the same GPU, for scripts/device-check.sh: torchvision's model on
synthetic data with dlbench's settings (SGD with momentum 0.9, lr 0.01, NCHW, fp32 strict or
TF32), timed as dlbench times: warm-up steps, then timed steps with the device synchronised at
the start and the end. Prints one JSON object: images per second and the median step time.

usage: torch_bench.py MODEL BATCH IMAGE_SIZE PRECISION [--steps N] [--warmup N]
"""
import argparse
import json
import statistics
import time

import torch
import torchvision


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("batch", type=int)
    ap.add_argument("image_size", type=int)
    ap.add_argument("precision", choices=["fp32", "tf32"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    a = ap.parse_args()
    tf32 = a.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = getattr(torchvision.models, a.model)(weights=None, num_classes=1000).to(dev).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(a.batch, 3, a.image_size, a.image_size, device=dev)
    y = torch.randint(0, 1000, (a.batch,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    times = []
    t0 = time.perf_counter()
    for _ in range(a.steps):
        s = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - s)
    total = time.perf_counter() - t0
    print(json.dumps({"system": "pytorch", "torch": torch.__version__,
                      "cudnn": torch.backends.cudnn.version(), "model": a.model,
                      "batch": a.batch, "image_size": a.image_size, "precision": a.precision,
                      "img_s": a.batch * a.steps / total, "step_median_s": statistics.median(times),
                      "peak_bytes": torch.cuda.max_memory_allocated()}))


if __name__ == "__main__":
    main()
