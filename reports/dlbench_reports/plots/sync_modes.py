"""Sync modes on the digits (--sync: sync, stale:K, async; --straggler): time to accuracy and
throughput per mode, side by side with and without a straggler, one panel per rank count; and
throughput against staleness (sync is 0, stale:K is K, async is its measured median). The
figures are the records' (metrics.convergence, metrics.throughput_img_s, metrics.async)."""
from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from ..records import Record
from . import common

NOTE = ("sync averages every rank's gradients each step; stale:K applies the average of K steps "
        "before, so each all-reduce runs behind the next K steps; async applies each rank's "
        "gradients alone on a parameter server (rank 0), and no rank waits for another. A "
        "straggler's compute passes take twice as long. Throughput is every rank's training "
        "images over the training time; a bar marked x did not reach the target.")
# The caption under the staleness figure in the report.
STALENESS_NOTE = ("Training throughput against the staleness of each sync mode's updates (the "
                  "updates applied between a gradient's weights and its own update), a line per "
                  "rank count and straggler.")


def stale_steps(mode: str) -> float | None:
    """K of "stale:K", or None for any other mode, or a K that is no number (config.sync is any
    string in the schema: "stale:x" was a ValueError)."""
    if not mode.startswith("stale:"):
        return None
    try:
        return float(mode.split(":", 1)[1])
    except ValueError:
        return None


def mode_order(mode: str) -> tuple:
    if mode == "sync":
        return (0, 0.0, mode)
    k = stale_steps(mode)
    if k is not None:
        return (1, k if k == k else math.inf, mode)  # NaN ("stale:nan") last
    return (2, 0.0, mode)


def runs(records: list[Record]) -> list[Record]:
    """Ok digits runs to a target whose suite point names a sync mode."""
    return [r for r in records if r.ok and "sync" in r.point_config and
            r.get("metrics.convergence") is not None]


def staleness(r: Record) -> float:
    """sync 0, stale:K K, async its measured median; NaN where the mode names no number."""
    mode = str(r.config.get("sync", "sync"))
    if mode == "sync":
        return 0.0
    if mode == "async":
        median = r.get("metrics.async.staleness_median")
        return 0.0 if median is None else median
    k = stale_steps(mode)
    return math.nan if k is None else k


def mode_bars(panel: list[Record], mode: str, stragglers: list[str],
              undrawn: common.Undrawn) -> tuple[list, list, list]:
    """One mode's bars, a straggler setting each: time to accuracy (the run's length where the
    target was missed, marked), throughput, and whether it was missed; NaN where no point ran
    or its value cannot be drawn (undrawn names it)."""
    tta, tput, missed = [], [], []
    for s in stragglers:
        hit = [r for r in panel if r.config.get("sync", "sync") == mode and
               (r.config.get("straggler") or "none") == s]
        if not hit:
            tta.append(math.nan)
            tput.append(math.nan)
            missed.append(False)
            continue
        conv = hit[0].need("metrics.convergence")
        reached = bool(conv["reached"] and conv["time_to_accuracy_s"])
        tta.append(undrawn.of(hit[0], conv["time_to_accuracy_s"], "time to accuracy (s)")
                   if reached else undrawn.of(hit[0], conv["run_seconds"], "run time (s)"))
        missed.append(not reached)
        tput.append(undrawn.of(hit[0], hit[0].need("metrics.throughput_img_s"), "throughput"))
    return tta, tput, missed


def render(records: list[Record]):
    rs = [r for r in runs(records) if r.config["ranks"] > 1]
    if not rs:
        return None
    ranks = sorted({r.config["ranks"] for r in rs})
    fig, axes = common.plt.subplots(2, len(ranks), figsize=(5.2 * len(ranks), 7.0), dpi=110,
                                    squeeze=False)
    undrawn = common.Undrawn()
    for col, n in enumerate(ranks):
        panel = [r for r in rs if r.config["ranks"] == n]
        modes = sorted({r.config.get("sync", "sync") for r in panel}, key=mode_order)
        stragglers = sorted({r.config.get("straggler") or "none" for r in panel},
                            key=lambda s: (s != "none", s))
        width = 0.8 / max(len(modes), 1)
        for i, mode in enumerate(modes):
            x = np.arange(len(stragglers)) + (i - (len(modes) - 1) / 2) * width
            tta, tput, missed = mode_bars(panel, mode, stragglers, undrawn)
            # An empty mode (config.sync is any string) would be no legend entry, and a warning.
            name = common.shorten(mode, 24) or "''"
            axes[0][col].bar(x, tta, width, color=f"C{i}", label=name, gid=f"tta:{n}:{mode}")
            for xi, yi, m in zip(x, tta, missed):
                if m and not math.isnan(yi):
                    axes[0][col].plot([xi], [yi], "kx", markersize=8)
            axes[1][col].bar(x, tput, width, color=f"C{i}", label=name, gid=f"tput:{n}:{mode}")
        for row in (0, 1):
            ax = axes[row][col]
            ax.set_xticks(np.arange(len(stragglers)))
            ax.set_xticklabels([f"straggler {s}" if s != "none" else "no straggler"
                                for s in stragglers])
            ax.grid(axis="y", alpha=0.3)
        axes[0][col].set_title(f"{n} ranks", fontsize=9)
        axes[0][col].set_ylabel("time to accuracy (s)")
        axes[1][col].set_ylabel("training throughput (img/s)")
        axes[0][col].legend(fontsize=7, title="sync mode", title_fontsize=7)
    fig.suptitle(f"Sync modes: {common.describe(rs)}", fontsize=10)
    common.footnote(fig, common.status_note(records), undrawn)
    return fig


def render_staleness(records: list[Record]):
    rs = [r for r in runs(records) if r.config["ranks"] > 1]
    if len({r.config.get("sync") for r in rs}) < 2:
        return None
    lines: dict[tuple, list[Record]] = defaultdict(list)
    for r in rs:
        lines[(r.config["ranks"], r.config.get("straggler") or "none")].append(r)
    fig, ax = common.figure(7.5, 4.8)
    undrawn = common.Undrawn()
    for i, ((n, s), group) in enumerate(sorted(lines.items())):
        points = sorted(((undrawn.of(r, staleness(r), "staleness"),
                          undrawn.of(r, r.need("metrics.throughput_img_s"), "throughput"), r)
                         for r in group), key=lambda p: (math.isnan(p[0]), p[0]))
        ax.plot([x for x, _, _ in points], [y for _, y, _ in points],
                "o-" if s == "none" else "s--", color=f"C{i}",
                label=f"{n} ranks, " + ("no straggler" if s == "none" else f"straggler {s}"),
                gid=f"staleness:{n}:{s}")
        for x, y, r in points:
            if not (math.isnan(x) or math.isnan(y)):
                ax.annotate(common.shorten(str(r.config.get("sync", "sync")), 24), (x, y),
                            textcoords="offset points", xytext=(3, 3), fontsize=6)
    ax.set_xlabel("staleness (updates between a gradient's weights and its update; async: "
                  "median)")
    ax.set_ylabel("training throughput (img/s)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(f"Throughput against staleness: {common.describe(rs)}", fontsize=10)
    common.footnote(fig, common.status_note(records), undrawn)
    return fig
