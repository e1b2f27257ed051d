"""Throughput per model, one bar per precision, each labelled with its MFU and its ratio to the
same model's fp32 bar (with its 95% interval, intervals.py); below it, each
point's peak memory stacked by category, so a precision's memory (16-bit activations and
gradients, f32 master weights and their 16-bit copies) sits under its speed."""
from __future__ import annotations

import math

import numpy as np

from .. import intervals
from .. import peaks as peaks_mod
from ..records import Record, schema_enum
from . import common

# The caption under the figure in the report.
NOTE = ("Each bar is a model's throughput at one precision, labelled with its MFU and its "
        "ratio to the same model's fp32 bar (with that ratio's 95% interval); below, each "
        "point's peak memory stacked by category.")

CATEGORIES = schema_enum("memory_category")

ORDER = ["fp32", "tf32", "fp16", "bf16"]


def bar_label(r: Record) -> str:
    """A bar per precision, and per precision with --cuda-graph where a suite sweeps it."""
    p = r.config.get("precision", "fp32")
    return f"{p} graph" if r.config.get("cuda_graph") else p


def order(label: str) -> tuple:
    p, _, graph = label.partition(" ")
    return (ORDER.index(p) if p in ORDER else 99, graph)


def table(records: list[Record], peaks: list[dict]) -> dict:
    ok = [r for r in records if r.ok]
    models = sorted({r.config["model"] for r in ok})
    precisions = sorted({bar_label(r) for r in ok}, key=order)
    cells = {}
    for r in ok:
        key = (r.config["model"], bar_label(r))
        cells[key] = {"record": r, "throughput": r.need("metrics.throughput_img_s"),
                      "mfu": peaks_mod.mfu(r, peaks),
                      "memory": r.need("memory.peak_bytes_by_category")}
    return {"models": models, "precisions": precisions, "cells": cells}


def ratio_to_fp32(t: dict, model: str, label: str) -> str:
    """'\n0.42x fp32 [0.40, 0.44]' for a bar beside its model's fp32 bar (of the same graph
    mode), 'not distinguishable' where the interval holds 1; '' for fp32 itself or without it."""
    base_label = "fp32 graph" if label.endswith(" graph") else "fp32"
    base, cell = t["cells"].get((model, base_label)), t["cells"].get((model, label))
    if base is None or label == base_label:
        return ""
    ratio = cell["throughput"] / base["throughput"]
    iv = intervals.ratio_interval(cell["record"], base["record"])
    text = f"{common.number_text(ratio)}x fp32"
    if iv:
        text += " " + intervals.interval_text(iv) + (
            " n.d." if intervals.finite(iv) and iv[0] <= 1 <= iv[1] else "")
    return "\n" + text


def memory_panel(ax, t: dict, x, width: float) -> None:
    """Peak memory by category, one stacked bar per (model, precision), placed as the bars above."""
    # The device's categories: host memory (common.HOST_CATEGORIES) is not in a device's peak.
    cats = [c for c in CATEGORIES if c not in common.HOST_CATEGORIES
            and any(cell["memory"].get(c, 0) for cell in t["cells"].values())]
    for i, p in enumerate(t["precisions"]):
        bottom = np.zeros(len(t["models"]))
        xs = x + (i - (len(t["precisions"]) - 1) / 2) * width
        for j, cat in enumerate(cats):
            h = np.array([t["cells"].get((m, p), {}).get("memory", {}).get(cat, 0) / common.MIB
                          for m in t["models"]])
            ax.bar(xs, h, width * 0.9, bottom=bottom, color=f"C{j}", gid=f"memory:{p}:{cat}",
                   label=cat if i == 0 else None, edgecolor="white", linewidth=0.5)
            bottom += h
        for xi, top in zip(xs, bottom):
            if top > 0:
                ax.annotate(p, (xi, top), textcoords="offset points", xytext=(0, 2),
                            ha="center", fontsize=6)
    ax.set_xticks(x)
    ax.set_xticklabels(t["models"])
    ax.set_ylabel("peak memory (MiB)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(title="memory category", fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              frameon=False)
    ax.set_title("Peak memory by category (each category's own peak)", fontsize=9)


def fit_labels(fig, ax) -> None:
    """The y axis tall enough that every upright bar label ends inside it. A label is a fixed
    number of points tall, so raising the top shrinks the data it spans: measured on the drawn
    figure and raised until each ends below the top (a few rounds)."""
    common.set_top(ax, ax.get_ylim()[1] * 1.1)
    for _ in range(4):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        box = ax.get_window_extent(renderer)
        over = max((t.get_window_extent(renderer).y1 for t in ax.texts), default=0.0)
        if over <= box.y1 - 2:
            return
        # The top's pixel is box.y1; the highest label ends at `over`: scale the data range so
        # that `over` lands inside, by the label's share of the axis.
        top = ax.get_ylim()[1]
        common.set_top(ax, top * (over - box.y0 + 4) / (box.y1 - box.y0))


def throughput_bars(ax, t: dict, x, width: float, peaks: list[dict],
                    undrawn: common.Undrawn) -> None:
    """A bar per precision beside each model's others, with its 95% interval and, upright
    above it, its MFU and ratio to fp32; a throughput no plot can draw left out and named."""
    for i, p in enumerate(t["precisions"]):
        heights = [undrawn.of(c["record"], c["throughput"], "throughput")
                   if (c := t["cells"].get((m, p))) else 0.0 for m in t["models"]]
        bars = ax.bar(x + (i - (len(t["precisions"]) - 1) / 2) * width, heights, width,
                      label=p, color=f"C{i}", gid=f"precision:{p}")
        # Each bar's 95% throughput interval (intervals.py), where it has one that can be drawn.
        ivs = {m: iv for m in t["models"] if (c := t["cells"].get((m, p)))
               and (iv := intervals.throughput_interval(c["record"]))
               and all(map(common.drawable, iv))}
        centers = {m: bar.get_x() + bar.get_width() / 2 for bar, m in zip(bars, t["models"])}
        if ivs:
            ax.vlines([centers[m] for m in ivs], [iv[0] for iv in ivs.values()],
                      [iv[1] for iv in ivs.values()], color="black", linewidth=1.2,
                      gid=f"interval:{p}")
        for bar, m in zip(bars, t["models"]):
            cell = t["cells"].get((m, p))
            if not cell or math.isnan(bar.get_height()):
                continue
            text = "MFU " + peaks_mod.mfu_text(cell["record"], peaks)
            text += ratio_to_fp32(t, m, p)
            # Upright above the bar and its interval: a label wider than its bar would run into
            # its neighbours' (seen with three precisions of a model side by side).
            top = max(bar.get_height(), ivs[m][1] if m in ivs else 0.0)
            ax.annotate(text, (centers[m], top),
                        textcoords="offset points", xytext=(0, 3), ha="center", va="bottom",
                        rotation=90, fontsize=7, gid=f"mfu:{m}:{p}")


def render(records: list[Record], peaks: list[dict] | None = None):
    peaks = peaks_mod.load_peaks() if peaks is None else peaks
    t = table(records, peaks)
    if not t["cells"]:
        return None
    fig, (ax, mem_ax) = common.plt.subplots(
        2, 1, figsize=(max(7.0, 2.2 * len(t["models"]) + 3), 9.0), dpi=110,
        gridspec_kw={"hspace": 0.45})
    fig.subplots_adjust(right=0.78)
    width = 0.8 / len(t["precisions"])
    x = np.arange(len(t["models"]))
    undrawn = common.Undrawn()
    throughput_bars(ax, t, x, width, peaks, undrawn)
    memory_panel(mem_ax, t, x, width)
    ax.set_xticks(x)
    ax.set_xticklabels(t["models"])
    ax.set_xlabel("model")
    ax.set_ylabel("throughput (images/s)")
    ax.legend(title="precision", fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", alpha=0.3)
    sizes = sorted({r.config.get("image_size") for r in records if r.ok},
                   key=lambda v: (v is None, v or 0))  # null: the schema allows it
    batches = sorted({r.config.get("batch") for r in records if r.ok})
    ax.set_title(f"Precision: {common.describe(records)}\n"
                 f"batch {'/'.join(map(str, batches))}, {'/'.join(map(str, sizes))}px; "
                 "MFU = achieved FLOP/s / dense peak ((m): this machine's measured peak); "
                 "black bars: 95% intervals", fontsize=10)
    missing = sorted({common.device_name(r) for r in records
                      if r.ok and peaks_mod.mfu_and_basis(r, peaks) is None})
    note = common.status_note(records)
    if any((r.data.get("environment") or {}).get("device") == "cpu" for r in records if r.ok):
        note = (note + ". " if note else "") + (
            "On a CPU, fp16 tensors, and bf16 ones where the CPU lacks AVX-512 BF16, are stored "
            "in 16 bits and computed on f32 copies, converted for every op: their ratio to fp32 "
            "measures those conversions; bf16 convolutions and matrix products with AVX-512 BF16 "
            "multiply natively (the record's metrics.arithmetic) (n.d.: not distinguishable)")
    if missing:
        note = (note + "; " if note else "") + (
            "MFU n/a: no dense peak on record for " + ", ".join(missing) +
            " (device_peaks.json), and no measured one (dlbench bench peak)")
    common.footnote(fig, note, undrawn)
    fit_labels(fig, ax)  # last: the footnote is placed under what the axes hold
    return fig
