"""What every plot shares: the device/model/precision title, units and file output."""
from __future__ import annotations

import math
import os
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..outputs import check_output  # noqa: E402
from ..records import Record  # noqa: E402

MIB = 1024.0 * 1024.0
STRATEGIES = ["none", "backward", "forward"]


def strategy_order(strategy: str) -> tuple:
    """Sort key: none, backward, forward, then anything else by name."""
    return (STRATEGIES.index(strategy) if strategy in STRATEGIES else len(STRATEGIES), strategy)


def device_name(record: Record) -> str:
    env = record.data.get("environment") or {}  # its values are untyped in the schema
    device = env.get("device", "?")
    if device == "cpu":
        threads = env.get("cpu_threads")
        cpu = env.get("cpu", "CPU")
        return f"{cpu}" + (f" ({threads} hardware threads)" if threads else "")
    return str(device)


def describe(records: list[Record], keys=("model", "precision")) -> str:
    """'resnet18, fp32 on <device>': each key's value, or all its values when they differ, over
    the points that ran (all points when none did)."""
    records = [r for r in records if r.ok] or records
    parts = []
    for k in keys:
        values = sorted({str(r.config.get(k)) for r in records})
        parts.append("/".join(values))
    devices = sorted({device_name(r) for r in records})
    return ", ".join(parts) + " on " + " / ".join(devices)


def figure(width=8.0, height=5.0):
    fig, ax = plt.subplots(figsize=(width, height), dpi=110)
    return fig, ax


def set_top(ax, top: float) -> None:
    """The y axis from 0 to `top`, where `top` is finite (values near the largest double sum to
    inf); matplotlib's own limits otherwise."""
    if math.isfinite(top) and top > 0:
        ax.set_ylim(0, top)


def footnote(fig, text: str) -> None:
    """A note under the axes (failed points, missing peaks), with room made for it."""
    if not text:
        return
    lines = textwrap.wrap(text, width=int(fig.get_figwidth() * 16))
    height = fig.get_figheight()
    fig.subplots_adjust(bottom=min(0.5, 0.12 + (0.16 * len(lines) + 0.2) / height))
    fig.text(0.01, 0.01, "\n".join(lines), fontsize=7, color="#555555", ha="left", va="bottom")


def save(fig, out_dir: str | Path, name: str) -> list[Path]:
    """Writes NAME.png and NAME.svg (each to a temporary name, then renamed)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for ext in ("png", "svg"):
        final = out_dir / f"{name}.{ext}"
        check_output(final, "plot")  # never renamed over a device or FIFO put in its place
        tmp = out_dir / f".{name}.{ext}.tmp"
        fig.savefig(tmp, format=ext, bbox_inches="tight")
        os.replace(tmp, final)
        written.append(final)
    plt.close(fig)
    return written


def noisy(record: Record) -> list[str] | None:
    """The reasons a point was measured on a noisy machine (the record's noise verdict), or None
    for a stable point or a record without a verdict."""
    n = record.get("noise")
    if not isinstance(n, dict) or n.get("verdict") != "noisy":
        return None
    return [str(x) for x in n.get("reasons", [])] or ["noisy"]


def status_note(records: list[Record]) -> str:
    """'not plotted: ranks=4 overlap=none (timeout)' for the points that did not end ok, and
    'noisy: ...' with the reasons for the ok points measured on a noisy machine."""
    from ..records import label, varying_keys
    keys = varying_keys(records)
    bad = [r for r in records if not r.ok]
    loud = [r for r in records if r.ok and noisy(r)]
    notes = []
    if bad:
        notes.append("not plotted: " +
                     "; ".join(f"{label(r, keys)} ({r.data['status']})" for r in bad))
    if loud:
        notes.append("noisy (measured while the machine was busy; read with care): " +
                     "; ".join(f"{label(r, keys)} ({', '.join(noisy(r))})" for r in loud))
    return ". ".join(notes)
