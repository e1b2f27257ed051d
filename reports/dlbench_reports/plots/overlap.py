"""Where a step's time goes, per overlap strategy: stacked forward, backward, optimizer and
exposed communication (what the step waits for), with the hidden communication (overlapped by
compute, so off the critical path) drawn hatched on top."""
from __future__ import annotations

import numpy as np

from ..records import Record, label, varying_keys
from . import common

SEGMENTS = [("forward", "forward (+ loss)"), ("backward", "backward"),
            ("optimizer", "optimizer"), ("exposed", "exposed comm"),
            ("other", "other (host, copies, idle)")]


def breakdown(record: Record) -> dict:
    """Per traced step, in seconds, from metrics.phases and metrics.comm."""
    p = record.need("metrics.phases")
    comm = record.get("metrics.comm") or {"comm_total_s": 0.0, "comm_exposed_s": 0.0}
    exposed, total = comm["comm_exposed_s"], comm["comm_total_s"]
    parts = {
        "forward": p["forward_s"] + p["loss_s"],
        "backward": p["backward_s"],
        "optimizer": p["optimizer_s"],
        "exposed": exposed,
    }
    parts["other"] = max(0.0, p["step_s"] - sum(parts.values()))
    # Buckets in flight together: count the time some all-reduce runs once (comm_busy), not once
    # per bucket (comm_total, which includes each bucket's wait behind the others).
    busy = comm.get("comm_busy_s", total)
    parts["hidden"] = max(0.0, busy - exposed)
    parts["step"] = p["step_s"]
    return parts


def render(records: list[Record]):
    ok = [r for r in records if r.ok and r.get("metrics.phases") and r.get("metrics.comm")]
    if not ok:
        return None
    keys = [k for k in varying_keys(ok) if k != "overlap"]
    ok.sort(key=lambda r: (str([r.config.get(k) for k in keys]),
                           common.strategy_order(r.config.get("overlap", "none"))))
    names = [label(r, ["overlap"] + keys).replace(" ", "\n") for r in ok]
    data = [breakdown(r) for r in ok]
    fig, ax = common.figure(max(7.0, 1.3 * len(ok) + 3), 5.5)
    x = np.arange(len(ok))
    bottom = np.zeros(len(ok))
    colors = {"forward": "C0", "backward": "C1", "optimizer": "C2", "exposed": "C3",
              "other": "#bbbbbb"}
    for key, text in SEGMENTS:
        h = np.array([d[key] * 1e3 for d in data])
        ax.bar(x, h, 0.6, bottom=bottom, label=text, color=colors[key], gid=f"segment:{key}")
        bottom += h
    hidden = np.array([d["hidden"] * 1e3 for d in data])
    ax.bar(x, hidden, 0.6, bottom=bottom, label="hidden comm (all-reduce running under compute)",
           color="none", edgecolor="C3", hatch="//", gid="segment:hidden")
    ax.set_xticks(x)
    ax.set_xticklabels(names, fontsize=8)
    ax.set_ylabel("time per step (ms, mean of the traced steps)")
    ax.grid(axis="y", alpha=0.3)
    ranks = sorted({r.config["ranks"] for r in ok})
    ax.set_title(f"Overlap: {common.describe(ok)}\nranks {'/'.join(map(str, ranks))}, "
                 f"batch {'/'.join(str(b) for b in sorted({r.config['batch'] for r in ok}))} "
                 "per rank; rank 0's spans", fontsize=10)
    ax.legend(fontsize=7, loc="upper right")
    common.set_top(ax, max(bottom + hidden) * 1.25)
    common.footnote(fig, common.status_note(records))
    return fig
