"""Time to accuracy: test accuracy after each epoch against time from run_start, evaluations
included (the clock time to accuracy is on, so each line ends at its run's time to accuracy),
one line per point, one panel per rank count (points at different ranks are different
experiments), with the target and each run's time and epochs in the legend."""
from __future__ import annotations

import itertools
import math

from ..records import Record, label, varying_keys
from . import common

# The caption under the figure in the report.
NOTE = ("Test accuracy after each epoch against the time from run_start, evaluations "
        "included, so each line ends at its run's time to accuracy; one panel per rank count, "
        "the target dashed.")


def curve(record: Record) -> dict:
    """The epochs that have both a time and an accuracy (the schema does not make the lists the
    same length). Time is epoch_end_seconds (from run_start, evaluations included); records
    written before it have only the training time, summed, and say so (`evaluations`)."""
    conv = record.need("metrics.convergence")
    ends = conv.get("epoch_end_seconds")
    if ends:
        n = min(len(ends), len(conv["eval_accuracy"]))
        seconds, evaluations = list(ends[:n]), True
    else:
        n = min(len(conv["epoch_train_seconds"]), len(conv["eval_accuracy"]))
        seconds = list(itertools.accumulate(conv["epoch_train_seconds"][:n]))
        evaluations = False
    return {"seconds": seconds, "accuracy": [100 * a for a in conv["eval_accuracy"][:n]],
            "target": 100 * conv["target_accuracy"], "tta": conv["time_to_accuracy_s"],
            "reached": conv["reached"], "epochs": conv["epochs"], "evaluations": evaluations}


def legend_tail(c: dict) -> str:
    """": 12.3 s (4 epochs)", ": not reached (30 epochs)", or ": reached, time not recorded
    (4 epochs)" (time_to_accuracy_s null, which the schema allows)."""
    epochs = f" ({c['epochs']} epoch{'s' if c['epochs'] != 1 else ''})"
    if not c["reached"]:
        return ": not reached" + epochs
    return (": reached, time not recorded" if c["tta"] is None
            else f": {common.number_text(c['tta'], '.1f')} s") + epochs


def render(records: list[Record]):
    runs = [r for r in records if r.ok and r.get("metrics.convergence")]
    if not runs:
        return None
    ranks = sorted({r.config["ranks"] for r in runs})
    fig, axes = common.plt.subplots(1, len(ranks), figsize=(max(7.0, 5.0 * len(ranks)), 5.0),
                                    dpi=110, sharey=True, squeeze=False)
    all_with_evaluations = True
    undrawn = common.Undrawn()
    for ax, n in zip(axes[0], ranks):
        targets = set()
        panel = [x for x in runs if x.config["ranks"] == n]
        # Each line named by what differs between this panel's runs (the title says the ranks).
        keys = [k for k in varying_keys(panel) if k != "ranks"] or ["model"]
        for i, r in enumerate(panel):
            c = curve(r)
            all_with_evaluations = all_with_evaluations and c["evaluations"]
            target = undrawn.of(r, c["target"], "target accuracy (%)")
            if not math.isnan(target):
                targets.add(target)
            ax.plot([undrawn.of(r, x, "time (s)") for x in c["seconds"]],
                    [undrawn.of(r, y, "test accuracy (%)") for y in c["accuracy"]], "o-",
                    color=f"C{i}", label=label(r, keys) + legend_tail(c),
                    gid=f"accuracy:{r.data['point']['index']}")
        for t in sorted(targets):
            ax.axhline(t, color="#888888", linestyle="--", gid=f"target:{n}:{t}")
            ax.annotate(f"target {t:.1f}%", (0, t), textcoords="offset points", xytext=(2, 3),
                        fontsize=7, color="#555555")
        ax.set_xlabel("time from run_start (s, evaluations included)")
        ax.set_ylim(0, 100)
        ax.set_xlim(left=0)
        ax.grid(alpha=0.3)
        ax.set_title(f"{n} rank{'s' if n != 1 else ''}", fontsize=9)
        # Under the panel: inside, it hid the first epochs' points and ran into the next panel.
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13),
                  title="time to accuracy (epochs run)", title_fontsize=7, frameon=False)
    axes[0][0].set_ylabel("test accuracy after the epoch (%)")
    fig.suptitle(f"Time to accuracy: {common.describe(runs)}\nscikit-learn digits, 360 held-out "
                 "images", fontsize=10)
    note = common.status_note(records)
    if not all_with_evaluations:
        note = (note + ". " if note else "") + (
            "Records written before epoch_end_seconds have only training time: their lines leave "
            "out evaluation, so they end before their time to accuracy")
    common.footnote(fig, note, undrawn)
    return fig
