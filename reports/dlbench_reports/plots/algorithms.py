"""Convolution algorithms (the algorithms suite): each convolution layer's time under each
policy (--conv-algo), from the points' per-layer profiles, and each policy's step time under a
sweep of workspace limits, where a policy that fits nothing under a limit is refused (its point
failed, its line broken there). Points that differ in anything else (model, batch, precision)
are plotted apart, one figure per group."""
from __future__ import annotations

import json
import math
import re

import numpy as np

from ..records import Record, RecordError, read_json_file
from . import common

# The caption under the figure in the report.
LAYER_NOTE = ("Each convolution layer's time per training step (forward, backward-data and "
              "backward-weights passes, medians of the traced steps), under each --conv-algo "
              "with no workspace limit. Where winograd or auto cannot run a layer's pass, that "
              "pass takes the heuristic's choice (the record's metrics.convolutions); im2col "
              "and onednn run every pass or fail the point.")
LIMIT_NOTE = ("Each policy's median step time against the workspace limit (the most one "
              "convolution pass may use). A missing marker is a point that failed: under that "
              "limit no algorithm the policy may take fits some pass, or the named algorithm "
              "runs no pass at all; its message is in the table above.")

# The order of the policies on both plots: named algorithms, then the choosing ones.
POLICIES = ["im2col", "onednn", "winograd", "auto", "matmul", "class:tensor_core", "class:other",
            "class:winograd", "class:fft", "heuristic", "autotune"]
PASSES = ("forward_ms", "backward_data_ms", "backward_weights_ms")
UNITS = {"": 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "KB": 1e3, "MB": 1e6,
         "GB": 1e9}
SIZE = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?([A-Za-z]*)")
# The most layers one figure draws (resnet152 has 155 convolutions); names are shortened.
MAX_LAYERS = 200
MAX_LABEL = 40


def policy(r: Record) -> str:
    return str(r.config.get("conv_algo") or "heuristic")


def policy_order(name: str) -> tuple:
    return (POLICIES.index(name) if name in POLICIES else len(POLICIES), name)


def color(name: str) -> str:
    return f"C{POLICIES.index(name) if name in POLICIES else len(POLICIES)}"


def limit_bytes(text) -> float:
    """'32MiB' -> 33554432.0, as dlbench's parse_bytes reads it; no limit (None) -> infinity.
    RecordError for anything else: the schema allows any string."""
    if text is None:
        return math.inf
    m = SIZE.fullmatch(str(text).strip())
    if not m or m.group(2) not in UNITS:
        raise RecordError(f"workspace_limit {common.shorten(str(text), MAX_LABEL)!r} is not a size")
    value = float(m.group(0)[:len(m.group(0)) - len(m.group(2))]) * UNITS[m.group(2)]
    if not (math.isfinite(value) and value >= 1):
        raise RecordError(f"workspace_limit {common.shorten(str(text), MAX_LABEL)!r} is not a "
                          "size of at least one byte")
    return value


def applies(records: list[Record]) -> bool:
    """Whether the records compare convolution policies: more than one --conv-algo."""
    return len({policy(r) for r in records}) > 1


def groups(records: list[Record]) -> list[list[Record]]:
    """The records by everything but their policy and workspace limit, in first-seen order."""
    out: dict[str, list[Record]] = {}
    for r in records:
        rest = {k: v for k, v in r.point_config.items()
                if k not in ("conv_algo", "workspace_limit", "system")}
        out.setdefault(json.dumps(rest, sort_keys=True, default=str), []).append(r)
    return list(out.values())


def conv_layer_times(profile, where: str) -> dict[str, float]:
    """{layer name: ms per step over its three passes} for the profile's convolution layers, in
    the network's order. A profile is a file another run wrote: one that is not what dlbench
    writes raises RecordError, naming `where`."""
    layers = profile.get("layers") if isinstance(profile, dict) else None
    if not isinstance(layers, list) or not all(isinstance(x, dict) for x in layers):
        raise RecordError(f"{where}: not a per-layer profile (no list of layers)")
    out = {}
    for layer in layers:
        if layer.get("kind") != "conv2d":
            continue
        times = [layer.get(p) for p in PASSES]
        if not all(t is None or common.drawable(t) for t in times):
            raise RecordError(f"{where}: layer {str(layer.get('name'))[:MAX_LABEL]!r} has a pass "
                              "time that is not a finite number")
        out[str(layer.get("name"))] = sum(float(t or 0.0) for t in times)
    return out


def unlimited_profiles(records: list[Record], resolve,
                       skipped: list[str] | None = None) -> dict[str, dict[str, float]]:
    """{policy: conv_layer_times} of each ok point with no workspace limit; a point without a
    readable profile is added to `skipped`, with the reason."""
    out = {}
    for r in records:
        if not r.ok or r.config.get("workspace_limit") is not None:
            continue
        where = f"the algorithms plot of point {r.data['point']['index']}"
        path = r.get("paths.profile")
        try:
            if not isinstance(path, str) or not path:
                raise RecordError("the record names no per-layer profile")
            out[policy(r)] = conv_layer_times(
                read_json_file(resolve(path), "a per-layer profile"), str(path)[:200])
        except RecordError as e:
            if skipped is not None:
                skipped.append(f"{where}: {e}")
    return dict(sorted(out.items(), key=lambda kv: policy_order(kv[0])))


def render_layers(records: list[Record], resolve, skipped: list[str] | None = None):
    times = unlimited_profiles(records, resolve, skipped)
    layers = list(dict.fromkeys(name for by_layer in times.values() for name in by_layer))
    if not layers:
        return None
    note = "" if len(layers) <= MAX_LAYERS else f"the first {MAX_LAYERS} of {len(layers)} layers"
    layers = layers[:MAX_LAYERS]
    fig, ax = common.figure(min(16.0, max(8.0, 0.6 * len(layers) + 3)), 5.0)
    x = np.arange(len(layers))
    width = 0.8 / len(times)
    missing = []
    for i, (name, by_layer) in enumerate(times.items()):
        h = [by_layer.get(layer, math.nan) for layer in layers]
        missing += [f"{name} {layer}" for layer in layers if layer not in by_layer]
        ax.bar(x + (i - (len(times) - 1) / 2) * width, h, width, label=name, color=color(name),
               gid=f"policy:{name}")
    ax.set_xticks(x)
    ax.set_xticklabels([common.shorten(n, MAX_LABEL) for n in layers], rotation=60, ha="right",
                       fontsize=7)
    ax.set_ylabel("ms per step (3 passes)")
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(f"Convolution layers by algorithm: {common.describe(records)}", fontsize=10)
    ax.legend(fontsize=8, title="conv_algo", title_fontsize=8)
    if missing:
        note += ("; " if note else "") + "no bar (not in that point's profile): "
        note += common.bounded_list(missing)
    common.footnote(fig, note)
    return fig


def sized(records: list[Record]) -> tuple[list[Record], list[Record]]:
    """The records whose workspace limit is a size (the schema allows any string) and whose step
    time, where they ran, can be drawn; and the others."""
    good, bad = [], []
    for r in records:
        try:
            limit_bytes(r.config.get("workspace_limit"))
        except RecordError:
            bad.append(r)
            continue
        drawable = not r.ok or common.drawable(r.get("metrics.step_time_s.median"))
        (good if drawable else bad).append(r)
    return good, bad


def render_limits(records: list[Record]):
    records, left_out = sized(records)
    limits = sorted({limit_bytes(r.config.get("workspace_limit")) for r in records})
    if len(limits) < 2 or not any(r.ok for r in records):
        return None
    names = {limit_bytes(r.config.get("workspace_limit")):
             common.shorten(str(r.config.get("workspace_limit") or "none"), MAX_LABEL)
             for r in records}
    fig, ax = common.figure(8.0, 5.0)
    x = np.arange(len(limits))
    for name in sorted({policy(r) for r in records}, key=policy_order):
        y = np.full(len(limits), np.nan)
        for r in records:
            if policy(r) == name and r.ok:
                y[limits.index(limit_bytes(r.config.get("workspace_limit")))] = (
                    1e3 * float(r.need("metrics.step_time_s.median")))
        ax.plot(x, y, "o-", label=name, gid=f"policy:{name}", color=color(name))
    ax.set_xticks(x)
    ax.set_xticklabels([names[v] for v in limits])
    ax.set_xlabel("--workspace-limit (per convolution pass)")
    ax.set_ylabel("median step time (ms)")
    ax.grid(alpha=0.3)
    ax.set_title(f"Step time under workspace limits: {common.describe(records)}", fontsize=10)
    ax.legend(fontsize=8, title="conv_algo", title_fontsize=8)
    note = common.status_note(records)
    if left_out:
        note += (". " if note else "") + "not drawn (a workspace limit or step time that is not "
        note += "a size or a number): " + common.bounded_list(
            [f"point {r.data['point']['index']}" for r in left_out])
    common.footnote(fig, note)
    return fig
