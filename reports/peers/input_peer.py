"""What the input peers (torch_input.py, dali_input.py) share: their command line and their
timing, so that `dlbench bench input` asks and reads both the same way. Imported from the
script's own folder, by whichever Python runs the peer."""
import argparse
import json
import sys
import time


def arguments(doc: str, name: str, min_workers: int) -> argparse.Namespace | None:
    """--root, --workers, --batch, --size, --batches, --warmup, --seed and --device; None (after
    one line on stderr) where a value is out of range."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--root", required=True)
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--batches", type=int, required=True)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                   help="where a peer that can decodes (dali: gpu is its mixed decoder, nvJPEG)")
    a = p.parse_args()
    if a.workers < min_workers or a.batch < 1 or a.size < 1 or a.batches < 1 or a.warmup < 0:
        print(f"{name}: error: workers >= {min_workers}; batch, size and batches >= 1",
              file=sys.stderr)
        return None
    return a


def time_batches(next_batch, a: argparse.Namespace) -> None:
    """`a.warmup` batches, then `a.batches` timed; prints one JSON line:
    {"images_per_s": ..., "seconds": ..., "images": ...}."""
    for _ in range(a.warmup):
        next_batch()
    start = time.perf_counter()
    for _ in range(a.batches):
        next_batch()
    seconds = time.perf_counter() - start
    images = a.batch * a.batches
    print(json.dumps({"images_per_s": images / seconds, "seconds": seconds, "images": images}))
