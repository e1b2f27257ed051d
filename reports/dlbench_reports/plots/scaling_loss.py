"""Where the time beyond linear scaling goes, per step: the step's excess over the one-rank step,
split into exposed communication, waiting for the slowest rank, compute slowdown and the rest
(docs/metrics.md, "Scaling loss"), stacked per rank count, one panel per overlap strategy. The
parts come from the records (metrics.scaling_loss); this plot adds nothing to them."""
from __future__ import annotations

import json
from collections import defaultdict

import numpy as np

from ..records import Record
from . import common

NOTE = ("Each bar is a point's step time beyond the one-rank step (the black mark), split into "
        "its causes: time waiting for all-reduces with every rank at the same speed (exposed "
        "communication), what the ranks' different speeds add to those waits (waiting for the "
        "slowest rank), the passes themselves taking longer than on one rank (compute slowdown), "
        "and what remains (the sync policy's own passes, the slowest rank's lag behind the mean).")

PARTS = [("exposed_comm_s", "exposed communication"),
         ("waiting_for_slowest_s", "waiting for the slowest rank"),
         ("compute_slowdown_s", "compute slowdown"),
         ("rest_s", "rest")]


def groups(records: list[Record]) -> dict[str, list[Record]]:
    """Ok records with a breakdown, by everything but ranks and strategy: the point as its suite
    (or the simulation) wrote it, and the network."""
    out: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if r.ok and r.get("metrics.scaling_loss") is not None:
            rest = {k: v for k, v in r.point_config.items() if k not in ("ranks", "overlap")}
            rest["mode"] = r.data.get("mode")
            out[json.dumps(rest, sort_keys=True)].append(r)
    return dict(out)


def title(group: list[Record], taken: list[str]) -> str:
    """A group's heading in the report: measured, or simulated (on its network), numbered where
    another group's reads the same."""
    net = group[0].get("simulation.network.name")
    base = ("Scaling loss, measured" if group[0].data.get("mode") != "simulated" else
            f"Scaling loss, simulated on {net}" if net else "Scaling loss, simulated")
    n = 1
    heading = base
    while heading in taken:
        n += 1
        heading = f"{base} ({n})"
    return heading


def stack(ax, x, rs: list[Record], strategy: str, undrawn: common.Undrawn) -> tuple[float, float]:
    """The parts of each point's loss stacked, a negative part (the rest, below the sum of the
    others) below zero; a part that cannot be drawn is left out of its stack and named. Returns
    the stacks' lowest and highest ends."""
    up = np.zeros(len(rs))
    down = np.zeros(len(rs))
    for i, (key, name) in enumerate(PARTS):
        ms = np.array([undrawn.of(r, 1e3 * r.need(f"metrics.scaling_loss.{key}"), f"{name} (ms)")
                       for r in rs])
        base = np.where(ms >= 0, up, down)
        ax.bar(x, ms, bottom=base, color=f"C{i}", label=name, gid=f"loss:{strategy}:{key}")
        up += np.where(ms >= 0, np.nan_to_num(ms), 0)
        down += np.where(ms < 0, np.nan_to_num(ms), 0)
    return float(np.min(down, initial=0.0)), float(np.max(up, initial=0.0))


def render(records: list[Record]):
    by_strategy: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        by_strategy[r.config.get("overlap", "none")].append(r)
    strategies = sorted(by_strategy, key=common.strategy_order)
    if not strategies:
        return None
    fig, axes = common.plt.subplots(1, len(strategies), figsize=(4.2 * len(strategies), 4.6),
                                    dpi=110, sharey=True, squeeze=False)
    undrawn = common.Undrawn()
    ends = [0.0]
    for ax, strategy in zip(axes[0], strategies):
        rs = sorted(by_strategy[strategy], key=lambda r: r.config["ranks"])
        x = np.arange(len(rs))
        ends += stack(ax, x, rs, strategy, undrawn)
        total = [undrawn.of(r, 1e3 * (r.need("metrics.scaling_loss.step_s") -
                                      r.need("metrics.scaling_loss.one_rank_step_s")),
                            "step minus one-rank step (ms)") for r in rs]
        ends += [t for t in total if np.isfinite(t)]
        ax.plot(x, total, "k_", markersize=14, label="step minus one-rank step")
        ax.set_xticks(x)
        ax.set_xticklabels([str(r.config["ranks"]) for r in rs], fontsize=7)
        ax.set_xlabel("ranks")
        ax.set_title(f"overlap={strategy}", fontsize=9)
        ax.axhline(0, color="#888888", linewidth=0.8)
        ax.grid(alpha=0.3, axis="y")
    axes[0][0].set_ylabel("ms per step beyond the one-rank step")
    # Room above the tallest stack (the axes share it), which autoscaling left flush with the top.
    low, high = min(ends), max(ends)
    if high > low:
        pad = 0.1 * (high - low)  # a rest within rounding of 0 below the axis needs no room
        axes[0][0].set_ylim(low - pad if low < -0.2 * pad else 0.0, high + pad)
    first = records[0]
    net = first.get("simulation.network.name")
    mode = f"simulated on {net}" if net else "measured"
    fig.suptitle(f"Scaling loss: {common.describe(records)},\nbatch {first.config['batch']} per "
                 f"rank, bucket {first.config.get('bucket_mb')} MB, {mode}", fontsize=10)
    lines, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(lines, labels, fontsize=7, loc="lower center", ncol=5, frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 0.94))
    common.footnote(fig, "", undrawn)
    return fig
