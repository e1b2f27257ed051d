"""Accuracy against the global batch (one rank, the digits): the best test accuracy each run
reached, with a constant learning rate and with the large-batch rules (linear scaling, warm-up;
Goyal et al. 2017), and the target. A run's epochs to the target are written beside its point."""
from __future__ import annotations

import math

from ..records import Record
from . import common

# The caption under the figure in the report.
NOTE = ("The best test accuracy each run reached against its global batch, with a constant "
        "learning rate and with the large-batch rules (linear scaling and warm-up), the "
        "target dashed; beside each point, the epochs it took to the target.")


def rules(r: Record) -> str:
    scaling = r.config.get("lr_scaling", "none")
    warmup = r.config.get("lr_warmup", "0")
    parts = []
    if scaling != "none":
        parts.append(f"{scaling} scaling (reference {r.config.get('lr_reference_batch', 256)})")
    if warmup not in ("0", 0, None):
        parts.append(f"warm-up {warmup}")
    return ", ".join(parts) or "constant rate"


def runs(records: list[Record]) -> list[Record]:
    """Ok one-rank digits runs to a target, in sync mode, with neither straggler nor an other
    precision than fp32: the global-batch sweep."""
    return [r for r in records if r.ok and r.config["ranks"] == 1 and
            r.get("metrics.convergence") is not None and
            r.config.get("sync", "sync") == "sync" and r.config.get("precision") == "fp32" and
            r.config.get("model") == "digits-cnn"]


def best_accuracy(r: Record) -> float | None:
    """The best test accuracy of the run's epochs, in %; None where it evaluated none (the schema
    allows an empty list)."""
    accuracies = r.need("metrics.convergence.eval_accuracy")
    return 100 * max(accuracies) if accuracies else None


def render(records: list[Record]):
    rs = runs(records)
    lines: dict[str, list[Record]] = {}
    for r in rs:
        lines.setdefault(rules(r), []).append(r)
    if not any(len({r.config["batch"] for r in g}) >= 3 for g in lines.values()):
        return None
    fig, ax = common.figure(7.5, 4.8)
    targets = set()
    drawn_x = False  # a log axis with no point (x and y both drawable) cannot be drawn
    undrawn = common.Undrawn()
    for i, (name, group) in enumerate(sorted(lines.items())):
        by_batch = {}
        for r in group:  # the first run of each batch
            by_batch.setdefault(r.config["batch"], r)
        points = [(by_batch[b], undrawn.of(by_batch[b], b, "global batch", log=True),
                   undrawn.of(by_batch[b], best_accuracy(by_batch[b]), "best test accuracy (%)"))
                  for b in sorted(by_batch)]
        ax.plot([x for _, x, _ in points], [y for _, _, y in points], "o-", color=f"C{i}",
                label=name, gid=f"batch:{name}")
        drawn_x = drawn_x or any(not (math.isnan(x) or math.isnan(y)) for _, x, y in points)
        for r, x, y in points:
            conv = r.need("metrics.convergence")
            targets.add(undrawn.of(r, 100 * conv["target_accuracy"], "target accuracy (%)"))
            text = f"{conv['epochs']} ep" if conv["reached"] else "not reached"
            if not (math.isnan(x) or math.isnan(y)):
                ax.annotate(text, (x, y), textcoords="offset points", xytext=(3, -10),
                            fontsize=6, color=f"C{i}")
    targets = {t for t in targets if not math.isnan(t)}
    for t in sorted(targets):
        ax.axhline(t, color="#888888", linestyle="--", gid=f"target:{t}")
    if drawn_x:
        ax.set_xscale("log", base=2)
    ax.set_xlabel("global batch")
    ax.set_ylabel("best test accuracy in the run (%)")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(f"Accuracy against global batch: {common.describe(rs)}", fontsize=10)
    common.footnote(fig, common.status_note(records), undrawn)
    return fig
