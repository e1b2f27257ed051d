"""Convolution algorithms (the algorithms suite): each convolution layer's time under each
policy (--conv-algo), from the points' per-layer profiles, and each policy's step time under a
sweep of workspace limits, where a policy that fits nothing under a limit is refused (its point
failed, its line broken there)."""
from __future__ import annotations

import re

import numpy as np

from ..records import Record, RecordError, read_json_file
from . import common

# The caption under the figure in the report.
LAYER_NOTE = ("Each convolution layer's time per training step (forward, backward-data and "
              "backward-weights passes, medians of the traced steps), under each --conv-algo "
              "with no workspace limit. A named algorithm runs every layer it can; a layer it "
              "cannot run takes the heuristic's choice (the record's metrics.convolutions).")
LIMIT_NOTE = ("Each policy's median step time against the workspace limit (the most one "
              "convolution pass may use). A missing marker is a point that failed: under that "
              "limit no algorithm the policy may take fits some pass, or the named algorithm "
              "runs no pass at all; its message is in the table above.")

# The order of the policies on both plots: named algorithms, then the choosing ones.
POLICIES = ["im2col", "onednn", "winograd", "auto", "heuristic", "autotune"]
PASSES = ("forward_ms", "backward_data_ms", "backward_weights_ms")
UNITS = {"": 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "KB": 1e3, "MB": 1e6,
         "GB": 1e9}


def policy(r: Record) -> str:
    return str(r.config.get("conv_algo") or "heuristic")


def policy_order(name: str) -> tuple:
    return (POLICIES.index(name) if name in POLICIES else len(POLICIES), name)


def limit_bytes(text) -> float:
    """'32MiB' -> 33554432.0, as dlbench's parse_bytes reads it; no limit (None) -> infinity."""
    if text is None:
        return float("inf")
    m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2) not in UNITS:
        raise RecordError(f"workspace_limit {text!r} is not a size")
    return float(m.group(1)) * UNITS[m.group(2)]


def applies(records: list[Record]) -> bool:
    """Whether the records compare convolution policies: more than one --conv-algo."""
    return len({policy(r) for r in records}) > 1


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
            raise RecordError(f"{where}: layer {layer.get('name')!r} has a pass time that is "
                              "not a finite number")
        out[str(layer.get("name"))] = sum(float(t or 0.0) for t in times)
    return out


def unlimited_profiles(records: list[Record], resolve,
                       skipped: list[str] | None = None) -> dict[str, dict[str, float]]:
    """{policy: conv_layer_times} of each ok point with no workspace limit and a readable
    profile; a profile that cannot be read is added to `skipped`, with the reason."""
    out = {}
    for r in records:
        path = r.get("paths.profile")
        if not r.ok or r.config.get("workspace_limit") is not None or not path:
            continue
        try:
            out[policy(r)] = conv_layer_times(
                read_json_file(resolve(path), "a per-layer profile"), str(path))
        except RecordError as e:
            if skipped is not None:
                skipped.append(f"the algorithms plot of point {r.data['point']['index']}: {e}")
    return dict(sorted(out.items(), key=lambda kv: policy_order(kv[0])))


def render_layers(records: list[Record], resolve, skipped: list[str] | None = None):
    times = unlimited_profiles(records, resolve, skipped)
    if not times:
        return None
    layers = list(next(iter(times.values())))
    if not layers:
        return None
    fig, ax = common.figure(min(16.0, max(8.0, 0.6 * len(layers) + 3)), 5.0)
    x = np.arange(len(layers))
    width = 0.8 / len(times)
    for i, (name, by_layer) in enumerate(times.items()):
        h = [by_layer.get(layer, 0.0) for layer in layers]
        ax.bar(x + (i - (len(times) - 1) / 2) * width, h, width, label=name,
               color=f"C{POLICIES.index(name) if name in POLICIES else i}", gid=f"policy:{name}")
    ax.set_xticks(x)
    ax.set_xticklabels(layers, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("ms per step (3 passes)")
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(f"Convolution layers by algorithm: {common.describe(records)}", fontsize=10)
    ax.legend(fontsize=8, title="conv_algo", title_fontsize=8)
    fig.tight_layout()
    return fig


def sized(records: list[Record]) -> list[Record]:
    """The records whose workspace limit is a size this module reads (the schema allows any
    string), and whose step time, where they ran, can be drawn."""
    out = []
    for r in records:
        try:
            limit_bytes(r.config.get("workspace_limit"))
        except RecordError:
            continue
        if not r.ok or common.drawable(r.get("metrics.step_time_s.median")):
            out.append(r)
    return out


def render_limits(records: list[Record]):
    left_out = [r for r in records if r not in sized(records)]
    records = sized(records)
    limits = sorted({limit_bytes(r.config.get("workspace_limit")) for r in records})
    if len(limits) < 2 or not any(r.ok for r in records):
        return None
    names = {}
    for r in records:
        names[limit_bytes(r.config.get("workspace_limit"))] = (
            r.config.get("workspace_limit") or "none")
    fig, ax = common.figure(8.0, 5.0)
    x = np.arange(len(limits))
    for name in sorted({policy(r) for r in records}, key=policy_order):
        y = np.full(len(limits), np.nan)
        for r in records:
            if policy(r) == name and r.ok:
                y[limits.index(limit_bytes(r.config.get("workspace_limit")))] = (
                    1e3 * float(r.need("metrics.step_time_s.median")))
        ax.plot(x, y, "o-", label=name, gid=f"policy:{name}",
                color=f"C{POLICIES.index(name) if name in POLICIES else 0}")
    ax.set_xticks(x)
    ax.set_xticklabels([str(names[v]) for v in limits])
    ax.set_xlabel("--workspace-limit (per convolution pass)")
    ax.set_ylabel("median step time (ms)")
    ax.grid(alpha=0.3)
    ax.set_title(f"Step time under workspace limits: {common.describe(records)}", fontsize=10)
    ax.legend(fontsize=8, title="conv_algo", title_fontsize=8)
    note = common.status_note(records)
    if left_out:
        note += (" " if note else "") + "not drawn (a workspace limit or step time that is not "
        note += "a size or a number): " + common.bounded_list(
            [f"point {r.data['point']['index']}" for r in left_out])
    common.footnote(fig, note)
    return fig
