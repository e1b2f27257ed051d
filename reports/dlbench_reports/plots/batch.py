"""Throughput and peak memory against batch size; a peer's throughput (config.system) beside
dlbench's, dashed; each throughput's 95% interval (intervals.py) as a bar."""
from __future__ import annotations

import math

from .. import intervals
from ..records import Record
from . import common

# The caption under the figure in the report.
NOTE = ("Throughput (left axis) and the step's peak memory (right axis) against the batch "
        "per rank; each vertical bar is a throughput's 95% interval, and a peer's throughput "
        "(PyTorch) is dashed beside dlbench's.")


def series(records: list[Record]) -> dict:
    """dlbench's ok points by batch: throughput and peak memory."""
    ok = sorted((r for r in records if r.ok and r.system == "dlbench"),
                key=lambda r: r.config["batch"])
    return {
        "batch": [r.config["batch"] for r in ok],
        "throughput": [r.need("metrics.throughput_img_s") for r in ok],
        "interval": [intervals.throughput_interval(r) for r in ok],
        "peak_mib": [r.need("memory.peak_bytes_total") / common.MIB for r in ok],
        "records": ok,
    }


def peer_series(records: list[Record]) -> dict[str, dict]:
    """Per peer system, its ok points by batch: throughput."""
    out: dict[str, dict] = {}
    for r in sorted((r for r in records if r.ok and r.system != "dlbench"),
                    key=lambda r: r.config["batch"]):
        s = out.setdefault(r.system, {"batch": [], "throughput": [], "interval": [],
                                      "records": []})
        s["batch"].append(r.config["batch"])
        s["throughput"].append(r.need("metrics.throughput_img_s"))
        s["interval"].append(intervals.throughput_interval(r))
        s["records"].append(r)
    return out


def checked(s: dict, undrawn: common.Undrawn) -> dict:
    """The series as drawn: each value through undrawn (batches on a log axis), an interval only
    where both its ends can be drawn."""
    out = dict(s)
    rs = s["records"]
    out["batch"] = [undrawn.of(r, b, "batch", log=True) for r, b in zip(rs, s["batch"])]
    out["throughput"] = [undrawn.of(r, t, "throughput") for r, t in zip(rs, s["throughput"])]
    out["interval"] = [iv if iv and all(map(common.drawable, iv)) else None
                       for iv in s["interval"]]
    if "peak_mib" in s:
        out["peak_mib"] = [undrawn.of(r, m, "peak memory (MiB)") for r, m in zip(rs, s["peak_mib"])]
    return out


def interval_bars(ax, s: dict, color: str, system: str) -> None:
    """Each point's 95% throughput interval as a vertical bar at its batch (none without one)."""
    bars = [(b, iv) for b, iv in zip(s["batch"], s["interval"]) if iv and not math.isnan(b)]
    if bars:
        ax.vlines([b for b, _ in bars], [iv[0] for _, iv in bars], [iv[1] for _, iv in bars],
                  color=color, linewidth=2, alpha=0.6, gid=f"interval:{system}")


def render(records: list[Record]):
    if len({r.config["batch"] for r in records}) < 2:
        return None
    s = series(records)
    if not s["batch"]:
        return None
    fig, ax = common.figure()
    mem_ax = ax.twinx()
    undrawn = common.Undrawn()
    s = checked(s, undrawn)
    ax.plot(s["batch"], s["throughput"], "o-", color="C0", label="throughput, dlbench",
            gid="throughput")
    interval_bars(ax, s, "C0", "dlbench")
    for i, (peer, p) in enumerate(peer_series(records).items()):
        p = checked(p, undrawn)
        ax.plot(p["batch"], p["throughput"], "^-.", color=f"C{i + 1}",
                label=f"throughput, {peer}", gid=f"throughput:{peer}")
        interval_bars(ax, p, f"C{i + 1}", peer)
    mem_ax.plot(s["batch"], s["peak_mib"], "s--", color="C3",
                label="peak memory, dlbench (all categories)",
                gid="peak_memory")
    ax.set_xscale("log", base=2)
    ticks = [b for b in s["batch"] if not math.isnan(b)]
    ax.set_xticks(ticks)
    ax.set_xticklabels([common.tick_text(b) for b in ticks])
    ax.set_xlabel("batch (images per step per rank)")
    ax.set_ylabel("throughput (images/s)")
    mem_ax.set_ylabel("peak memory (MiB)")
    ax.set_ylim(bottom=0)
    mem_ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ranks = sorted({r.config["ranks"] for r in records})
    ax.set_title(f"Batch size: {common.describe(records)}\n"
                 f"{records[0].config.get('image_size')}px, ranks {'/'.join(map(str, ranks))}; "
                 "bars: 95% intervals",
                 fontsize=10)
    lines, labels = ax.get_legend_handles_labels()
    lines2, labels2 = mem_ax.get_legend_handles_labels()
    # Lower right: throughput and memory both tend to climb with batch, leaving it empty.
    ax.legend(lines + lines2, labels + labels2, fontsize=8, loc="lower right")
    common.footnote(fig, common.status_note(records), undrawn)
    return fig
