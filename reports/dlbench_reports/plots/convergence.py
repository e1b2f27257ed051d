"""Time to accuracy: test accuracy after each epoch against training time, one line per point,
with the target and the time at which each run reached it."""
from __future__ import annotations

import itertools

from ..records import Record, label, varying_keys
from . import common


def curve(record: Record) -> dict:
    """The epochs that have both a training time and an accuracy (the schema does not make the
    two lists the same length)."""
    conv = record.need("metrics.convergence")
    n = min(len(conv["epoch_train_seconds"]), len(conv["eval_accuracy"]))
    seconds = list(itertools.accumulate(conv["epoch_train_seconds"][:n]))
    return {"seconds": seconds, "accuracy": [100 * a for a in conv["eval_accuracy"][:n]],
            "target": 100 * conv["target_accuracy"], "tta": conv["time_to_accuracy_s"],
            "reached": conv["reached"]}


def legend_tail(c: dict) -> str:
    """": 12.3 s", ": not reached", or ": reached, time not recorded" (time_to_accuracy_s null,
    which the schema allows)."""
    if not c["reached"]:
        return ": not reached"
    return ": reached, time not recorded" if c["tta"] is None else f": {c['tta']:.1f} s"


def render(records: list[Record]):
    runs = [r for r in records if r.ok and r.get("metrics.convergence")]
    if not runs:
        return None
    keys = varying_keys(runs) or ["model"]
    fig, ax = common.figure()
    targets = set()
    for i, r in enumerate(runs):
        c = curve(r)
        targets.add(c["target"])
        text = label(r, keys) + legend_tail(c)
        ax.plot(c["seconds"], c["accuracy"], "o-", color=f"C{i}", label=text,
                gid=f"accuracy:{r.data['point']['index']}")
    for t in sorted(targets):
        ax.axhline(t, color="#888888", linestyle="--", gid=f"target:{t}")
        ax.annotate(f"target {t:.1f}%", (0, t), textcoords="offset points", xytext=(2, 3),
                    fontsize=7, color="#555555")
    ax.set_xlabel("training time (s, evaluations excluded)")
    ax.set_ylabel("test accuracy after the epoch (%)")
    ax.set_ylim(0, 100)
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right",
              title="time to accuracy (from run_start, evaluations included)", title_fontsize=7)
    ax.set_title(f"Time to accuracy: {common.describe(runs)}\nscikit-learn digits, 360 held-out "
                 "images", fontsize=10)
    common.footnote(fig, common.status_note(records))
    return fig
