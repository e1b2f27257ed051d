"""The device check's triage table: where a training step's milliseconds go, by pass kind, for
dlbench beside PyTorch on the same GPU, from the files the triage rows leave in one folder:

  dlbench-profile.json  dlbench's per-layer profile (each layer's median pass times, FLOPs and
                        cuDNN engines)
  dlbench-record.json   dlbench's result record (loss and optimizer from metrics.phases)
  pytorch-kernels.csv   PyTorch's time by GPU kernel (reports/peers/pytorch_profile.py)
  pytorch-profile.json  PyTorch's steps profiled and its median step
  ncu.csv               optional: Nsight Compute's per-kernel rows over one dlbench step
                        (duration, DRAM bytes), summed into each kind's GB/s

Any of them may be missing (a row that was skipped or failed): its column says so and the table
is still written. A kind's rate is TFLOP/s for convolutions (dlbench's FLOPs: a pass computes as
many as the forward) and GB/s from ncu's DRAM bytes where ncu ran.
"""
from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

from .outputs import check_output, write_text_atomically
from .records import RecordError, read_json_file, read_regular_file

KINDS = ("conv forward", "conv data gradient", "conv weight gradient", "batch norm",
         "element-wise", "pooling", "linear", "loss", "optimizer", "all-reduce", "other")

# PyTorch's kernels by name, first match wins: cuDNN's and CUTLASS's convolution kernels name
# their pass (dgrad, wgrad; fprop or none for forward).
KERNEL_KINDS = (
    ("conv data gradient", re.compile(r"dgrad", re.I)),
    ("conv weight gradient", re.compile(r"wgrad", re.I)),
    ("all-reduce", re.compile(r"nccl", re.I)),
    ("batch norm", re.compile(r"bn_|batch_?norm|welford", re.I)),
    ("pooling", re.compile(r"pool", re.I)),
    ("loss", re.compile(r"softmax|nll_loss|cross_entropy", re.I)),
    ("optimizer", re.compile(r"multi_tensor_apply|sgd|foreach", re.I)),
    ("conv forward", re.compile(r"fprop|implicit|conv|cudnn", re.I)),
    ("linear", re.compile(r"gemv|gemm|cublas", re.I)),
    ("element-wise", re.compile(r"elementwise|vectorized|threshold|relu|add|copy|fill|cast",
                                re.I)),
)
# dlbench's layers by kind: (profile field, pass kind).
LAYER_PASSES = {
    "conv2d": (("forward_ms", "conv forward"), ("backward_data_ms", "conv data gradient"),
               ("backward_weights_ms", "conv weight gradient")),
    "batch_norm": (("forward_ms", "batch norm"), ("backward_ms", "batch norm")),
    "relu": (("forward_ms", "element-wise"), ("backward_data_ms", "element-wise")),
    "add": (("forward_ms", "element-wise"), ("backward_data_ms", "element-wise")),
    "dropout": (("forward_ms", "element-wise"), ("backward_data_ms", "element-wise")),
    "linear": (("forward_ms", "linear"), ("backward_data_ms", "linear"),
               ("backward_weights_ms", "linear")),
}
ENGINE_PASS = {"forward": "conv forward", "backward_data": "conv data gradient",
               "backward_filter": "conv weight gradient"}


@dataclass
class Side:
    """One system's milliseconds per step by kind, with what ran them."""
    ms: dict[str, float] = field(default_factory=dict)
    flops: dict[str, float] = field(default_factory=dict)
    bytes: dict[str, float] = field(default_factory=dict)
    names: dict[str, dict[str, float]] = field(default_factory=dict)  # kind -> engine/kernel -> ms
    note: str = ""

    def add(self, kind: str, ms: float, name: str | None = None, flops: float = 0.0) -> None:
        self.ms[kind] = self.ms.get(kind, 0.0) + ms
        self.flops[kind] = self.flops.get(kind, 0.0) + flops
        if name:
            by = self.names.setdefault(kind, {})
            by[name] = by.get(name, 0.0) + ms


def pool_kind(kind: str) -> str | None:
    return "pooling" if "pool" in kind else None


def dlbench_side(d: Path) -> Side:
    side = Side()
    try:
        profile = read_json_file(d / "dlbench-profile.json", "dlbench's per-layer profile")
    except RecordError as e:
        side.note = f"no per-layer profile ({e})"
        return side
    for layer in profile.get("layers", []):
        kind = str(layer.get("kind", ""))
        passes = LAYER_PASSES.get(kind) or (
            (("forward_ms", "pooling"), ("backward_data_ms", "pooling")) if pool_kind(kind) else ())
        engines = {ENGINE_PASS.get(a.get("pass")): a.get("algorithm")
                   for a in layer.get("algorithms", []) if isinstance(a, dict)}
        for key, pass_kind in passes:
            ms = layer.get(key)
            if isinstance(ms, (int, float)) and ms > 0:
                flops = float(layer.get("forward_flops") or 0) if kind == "conv2d" else 0.0
                side.add(pass_kind, float(ms), engines.get(pass_kind), flops)
    try:
        phases = read_json_file(d / "dlbench-record.json", "dlbench's record")["metrics"]["phases"]
        side.add("loss", 1e3 * float(phases["loss_s"]))
        side.add("optimizer", 1e3 * float(phases["optimizer_s"]))
    except (RecordError, KeyError, TypeError, ValueError):
        side.note = side.note or "no phases in the record (loss and optimizer not shown)"
    return side


def kernel_kind(name: str) -> str:
    return next((kind for kind, pattern in KERNEL_KINDS if pattern.search(name)), "other")


def csv_rows(path: Path, what: str) -> list[dict[str, str]]:
    text = read_regular_file(path, what).decode("utf-8", errors="replace")
    return list(csv.DictReader(io.StringIO(text)))


def pytorch_side(d: Path) -> Side:
    side = Side()
    try:
        rows = csv_rows(d / "pytorch-kernels.csv", "PyTorch's kernel table")
        steps = int(read_json_file(d / "pytorch-profile.json", "PyTorch's profile")["steps"])
    except (RecordError, KeyError, TypeError, ValueError) as e:
        side.note = f"no PyTorch profile ({e})"
        return side
    for r in rows:
        try:
            ms = float(r["device_us"]) / 1e3 / max(steps, 1)
        except (KeyError, ValueError):
            continue
        side.add(kernel_kind(r.get("name", "")), ms, r.get("name"))
    return side


def add_ncu_bytes(d: Path, side: Side) -> None:
    """ncu's DRAM bytes per kernel, summed by kind (the kernel's name decides, as PyTorch's)."""
    path = d / "ncu.csv"
    if not path.exists():
        return
    try:
        rows = csv_rows(path, "ncu's kernel table")
    except RecordError:
        return
    for r in rows:
        name = r.get("Kernel Name") or r.get("kernel_name") or ""
        text = r.get("dram__bytes.sum") or r.get("dram__bytes.sum [byte]") or "nan"
        try:  # base units (--print-units base); a thousands separator is dropped
            b = float(text.replace(",", ""))
        except ValueError:
            continue
        if b == b:  # not NaN
            k = kernel_kind(name)
            side.bytes[k] = side.bytes.get(k, 0.0) + b


def top_names(side: Side, kind: str, n: int = 2) -> str:
    by = sorted(side.names.get(kind, {}).items(), key=lambda kv: -kv[1])[:n]
    return ", ".join(name if len(name) <= 48 else name[:45] + "..." for name, _ in by)


def rate(side: Side, kind: str) -> str:
    ms = side.ms.get(kind, 0.0)
    if ms <= 0:
        return ""
    if side.flops.get(kind):
        return f"{side.flops[kind] / (ms / 1e3) / 1e12:.1f} TFLOP/s"
    if side.bytes.get(kind):
        return f"{side.bytes[kind] / (ms / 1e3) / 1e9:.0f} GB/s"
    return ""


def ms_text(v: float | None) -> str:
    return "" if v is None else f"{v:.2f}"


def table(d: str | Path) -> str:
    """The triage table as Markdown: a row per pass kind, then the total; notes for what is
    missing."""
    d = Path(d)
    ours, theirs = dlbench_side(d), pytorch_side(d)
    add_ncu_bytes(d, ours)
    lines = ["| pass kind | dlbench ms | PyTorch ms | dlbench rate | dlbench engines | "
             "PyTorch kernels |", "|---|---:|---:|---|---|---|"]
    for kind in KINDS:
        a, b = ours.ms.get(kind), theirs.ms.get(kind)
        if a is None and b is None:
            continue
        lines.append(f"| {kind} | {ms_text(a)} | {ms_text(b)} | {rate(ours, kind)} | "
                     f"{top_names(ours, kind)} | {top_names(theirs, kind)} |")
    total_a = sum(ours.ms.values()) if ours.ms else None
    total_b = sum(theirs.ms.values()) if theirs.ms else None
    lines.append(f"| **total** | {ms_text(total_a)} | {ms_text(total_b)} | | | |")
    notes = [f"- {who}: {side.note}" for who, side in (("dlbench", ours), ("PyTorch", theirs))
             if side.note]
    head = [f"# Triage: where a step's milliseconds go ({d})", "",
            "Milliseconds per training step by pass kind: dlbench's per-layer profile (median "
            "of the traced steps) beside PyTorch's kernels under torch.profiler (summed over the "
            "profiled steps, divided by their count). Rates: TFLOP/s for convolutions, GB/s "
            "from ncu's DRAM bytes.", ""]
    return "\n".join(head + lines + ([""] + notes if notes else [])) + "\n"


def main(directory: str) -> int:
    d = Path(directory)
    if not d.is_dir():
        raise RecordError(f"{directory}: not a directory")
    out = d / "triage.md"
    check_output(out, "triage")
    text = table(d)
    write_text_atomically(out, text)
    print(text, end="")
    return 0
