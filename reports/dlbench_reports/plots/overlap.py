"""Where a step's time goes, per overlap strategy: stacked forward, backward, optimizer, exposed
communication (what the step waits for) and the rest, adding up to the step. Communication hidden
under compute is part of the compute segments' time, so it is drawn inside them, hatched from the
bar's foot (its length, not where in the step it ran), never on top: no bar is taller than its
step. A black line on each bar marks the median of every timed step (a few traced steps can
stray from it). The table beside it uses the same traced steps, and adds what each strategy
saves against `none` at the same point, by the medians (docs/metrics.md defines every
figure)."""
from __future__ import annotations

import numpy as np

from ..records import Record, label, varying_keys
from . import common

SEGMENTS = [("forward", "forward (+ loss)"), ("backward", "backward"),
            ("optimizer", "optimizer"), ("exposed", "exposed comm"),
            ("other", "other (host, copies, idle)")]

NOTE = ("Bars and the breakdown columns are the mean of the traced steps (the same steps for "
        "both); comm is the time some all-reduce runs, exposed the part with no compute "
        "running, hidden the part under compute. The black line on each bar, and 'saved vs "
        "none', are the median of every timed step: where a bar and its line differ, the few "
        "traced steps were not typical, and the line is the one to compare. 'saved vs none' "
        "compares that median with the `none` point of the same configuration; negative: the "
        "strategy was slower.")


def comm_parts(record: Record) -> dict | None:
    """metrics.comm as docs/metrics.md defines it, in seconds per traced step: comm (some
    all-reduce runs), exposed (and no compute does), hidden (under compute). Records written
    before those definitions have comm_busy_s for comm; the oldest have only the sum of spans,
    which is no time, so their comm and hidden are None (unknown)."""
    c = record.get("metrics.comm")
    if not c:
        return None
    comm = c.get("comm_s", c.get("comm_busy_s"))
    exposed = c["comm_exposed_s"]
    hidden = c.get("comm_hidden_s", None if comm is None else max(0.0, comm - exposed))
    return {"comm": comm, "exposed": exposed, "hidden": hidden}


def breakdown(record: Record) -> dict:
    """Per traced step, in seconds, from metrics.phases and metrics.comm: the segments add up to
    the step ("other" is what the rest leaves), and hidden lies within the compute segments."""
    p = record.need("metrics.phases")
    comm = comm_parts(record) or {"comm": 0.0, "exposed": 0.0, "hidden": 0.0}
    parts = {
        "forward": p["forward_s"] + p["loss_s"],
        # a recomputed forward pass (config.recompute) runs among the backward passes
        "backward": p["backward_s"] + p.get("recompute_s", 0.0),
        "optimizer": p["optimizer_s"],
        "exposed": comm["exposed"],
    }
    parts["other"] = max(0.0, p["step_s"] - sum(parts.values()))
    parts["hidden"] = None if comm["hidden"] is None else min(
        comm["hidden"], parts["forward"] + parts["backward"] + parts["optimizer"])
    parts["comm"] = comm["comm"]
    parts["step"] = p["step_s"]
    return parts


def _ordered(records: list[Record]) -> tuple[list[Record], list[str]]:
    ok = [r for r in records if r.ok and r.get("metrics.phases") and comm_parts(r)]
    keys = [k for k in varying_keys(ok) if k != "overlap"]
    ok.sort(key=lambda r: (str([r.config.get(k) for k in keys]),
                           common.strategy_order(r.config.get("overlap", "none"))))
    return ok, keys


def _baseline(record: Record, records: list[Record]) -> Record | None:
    """The ok `none` point whose configuration differs from `record`'s only in the strategy."""
    want = {k: v for k, v in record.point_config.items() if k != "overlap"}
    for r in records:
        if (r.ok and r.config.get("overlap") == "none" and r.system == record.system and
                {k: v for k, v in r.point_config.items() if k != "overlap"} == want):
            return r
    return None


def saved_vs_none(record: Record, records: list[Record]) -> tuple[float, float] | None:
    """(seconds, fraction) of the median timed step that `record` saves against its `none`
    point; None where there is no such point or `record` is it."""
    base = _baseline(record, records)
    if base is None or base is record:
        return None
    b, m = base.get("metrics.step_time_s.median"), record.get("metrics.step_time_s.median")
    if not b or m is None:
        return None
    return b - m, (b - m) / b


def ms(seconds: float | None) -> str:
    """Seconds as milliseconds for the table: '12.3', 'n/a' where unknown or not finite."""
    return "n/a" if seconds is None else common.number_text(seconds * 1e3, ".1f")


def table(records: list[Record]) -> tuple[list[str], list[list[str]]] | None:
    ok, keys = _ordered(records)
    if not ok:
        return None
    header = ["point", "overlap", *keys, "step ms", "exposed comm ms", "hidden comm ms",
              "comm ms", "hidden %", "median step ms (timed)", "saved vs none"]
    rows = []
    for r in ok:
        d = breakdown(r)
        saved = saved_vs_none(r, records)
        median = r.get("metrics.step_time_s.median")
        rows.append([
            str(r.data["point"]["index"]), str(r.config.get("overlap", "none")),
            *[str(r.point_config.get(k, r.config.get(k))) for k in keys],
            ms(d["step"]), ms(d["exposed"]), ms(d["hidden"]), ms(d["comm"]),
            f"{common.number_text(100 * d['hidden'] / d['comm'], '.0f')}%" if d["comm"] else "",
            "" if median is None else ms(median),
            ("" if r.config.get("overlap") == "none" else "no none point") if saved is None
            else f"{common.number_text(saved[0] * 1e3, '+.1f')} ms "
                 f"({common.number_text(100 * saved[1], '+.1f')}%)",
        ])
    return header, rows


def render(records: list[Record]):
    ok, keys = _ordered(records)
    if not ok:
        return None
    names = [label(r, ["overlap"] + keys).replace(" ", "\n") for r in ok]
    data = [breakdown(r) for r in ok]
    fig, ax = common.figure(max(7.0, 1.3 * len(ok) + 3), 5.5)
    x = np.arange(len(ok))
    bottom = np.zeros(len(ok))
    colors = {"forward": "C0", "backward": "C1", "optimizer": "C2", "exposed": "C3",
              "other": "#bbbbbb"}
    undrawn = common.Undrawn()
    for key, text in SEGMENTS:
        h = np.array([undrawn.of(r, d[key] * 1e3, f"{key} (ms)") for r, d in zip(ok, data)])
        ax.bar(x, h, 0.6, bottom=bottom, label=text, color=colors[key], gid=f"segment:{key}")
        bottom += np.nan_to_num(h)  # a segment left out adds nothing to the stack
    # Unknown in the oldest records (comm_parts): not drawn.
    hidden = np.array([undrawn.of(r, (d["hidden"] or 0.0) * 1e3, "hidden comm (ms)")
                       for r, d in zip(ok, data)])
    ax.bar(x, hidden, 0.3, bottom=0, label="hidden comm: as long as the all-reduce time under "
           "compute (drawn from the foot, inside the compute; not added)", color="none",
           edgecolor="black", hatch="//", gid="segment:hidden")
    # The median of every timed step, the table's: a few traced steps can stray far from it.
    medians = np.array([undrawn.of(r, (r.get("metrics.step_time_s.median") or np.nan) * 1e3,
                                   "median step (ms)") for r in ok])
    ax.scatter(x, medians, marker="_", s=1400, linewidths=2.5, color="black", zorder=5,
               label="_nolegend_", gid="median")
    ax.set_xticks(x)
    ax.set_xticklabels(names, fontsize=8)
    steps = sorted({r.get("metrics.phases.traced_steps") for r in ok} - {None})
    ax.set_ylabel(f"time per step (ms): bars the mean of {'/'.join(map(str, steps))} traced "
                  "steps,\nblack line the median of every timed step", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    ranks = sorted({r.config["ranks"] for r in ok})
    ax.set_title(f"Overlap: {common.describe(ok)}\nranks {'/'.join(map(str, ranks))}, "
                 f"batch {'/'.join(str(b) for b in sorted({r.config['batch'] for r in ok}))} "
                 "per rank; rank 0's spans", fontsize=10)
    ax.legend(fontsize=7, loc="upper right")
    common.set_top(ax, max(np.nanmax(np.append(medians, 0.0)), max(bottom)) * 1.35)
    common.footnote(fig, common.status_note(records), undrawn)
    return fig
