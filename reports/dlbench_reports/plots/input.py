"""Where the input pipeline bounds training (the input suite, docs/input.md): per model, the
training throughput on JPEG files and the loader's own rate against the loader's threads, and
the same training on synthetic data as a line: the step's own rate. Where the loader's rate
passes the step's, input stops bounding training."""
from __future__ import annotations

import json

from ..records import Record
from . import common

# The caption under the figure in the report.
NOTE = ("Against the loader's threads (images/s on a log axis): training on the JPEG files (solid; a cross where the "
        "record's verdict is input-bound, a step waiting more than 5% of its time for its "
        "batch), and the loader's own rate (dashed: the images its threads make per second of "
        "their work, times the threads). The dotted line is the same training on synthetic "
        "data: the step's own rate. Where the loader's rate passes it, input stops bounding "
        "training. On a CPU the loader's threads share the cores with compute, so the JPEG "
        "points also pay for their input in compute.")

_IMAGES = ("folder", "shards")


def _group_key(r: Record, *, decode: bool = True) -> str:
    """A point's group: its config but for the data source, the loader's threads and the
    system (the synthetic point of the same training is in the group); without `decode`, but
    for where the images were decoded too (a synthetic point decodes none)."""
    drop = ("data", "loader_threads", "system") + (() if decode else ("decode",))
    rest = {k: v for k, v in r.point_config.items() if k not in drop}
    return json.dumps(rest, sort_keys=True, default=str)


def groups(records: list[Record]) -> list[list[Record]]:
    """dlbench's ok points on JPEG files that have metrics.input, by training config and where
    they were decoded (--decode), each group with the synthetic points of its training."""
    ok = [r for r in records if r.ok and r.system == "dlbench"]
    by: dict[str, list[Record]] = {}
    for r in ok:
        if r.config.get("data") in _IMAGES and r.get("metrics.input"):
            by.setdefault(_group_key(r), []).append(r)
    synthetic: dict[str, list[Record]] = {}
    for r in ok:
        if r.config.get("data", "synthetic") == "synthetic":
            synthetic.setdefault(_group_key(r, decode=False), []).append(r)
    return [g + synthetic.get(_group_key(g[0], decode=False), []) for g in by.values()]


def _label(group: list[Record]) -> str:
    """The group's model, and "GPU decode" where its images were decoded on the device."""
    jpeg = [r for r in group if r.config.get("data") in _IMAGES]
    gpu = jpeg and jpeg[0].config.get("decode") == "gpu"
    return str(group[0].config.get("model")) + (" (GPU decode)" if gpu else "")


def series(group: list[Record]) -> dict:
    """The group's JPEG points by thread count (threads, throughput, loader rate, input-bound),
    and its synthetic point's throughput (None without one)."""
    jpeg = sorted((r for r in group if r.config.get("data") in _IMAGES and r.get("metrics.input")),
                  key=lambda r: r.need("metrics.input.threads"))
    synthetic = [r.need("metrics.throughput_img_s") for r in group
                 if r.config.get("data", "synthetic") == "synthetic"]
    return {
        "threads": [r.need("metrics.input.threads") for r in jpeg],
        "throughput": [r.need("metrics.throughput_img_s") for r in jpeg],
        "loader": [r.get("metrics.input.loader_img_s") for r in jpeg],
        "bound": [r.get("metrics.input.verdict") == "input-bound" for r in jpeg],
        "synthetic": synthetic[0] if synthetic else None,
        "model": _label(group),
    }


def render(records: list[Record]):
    found = groups(records)
    if not found:
        return None
    fig, ax = common.figure()
    for i, g in enumerate(found[:2]):  # at most 6 legend entries: 3 a model
        s = series(g)
        color = f"C{i}"
        pts = [(t, v) for t, v in zip(s["threads"], s["throughput"])
               if common.drawable(t, log=True) and common.drawable(v, log=True)]
        ax.plot([t for t, _ in pts], [v for _, v in pts], "o-", color=color,
                label=f"{s['model']}: training on JPEGs", gid=f"jpeg:{s['model']}")
        bound = [(t, v) for t, v, b in zip(s["threads"], s["throughput"], s["bound"])
                 if b and common.drawable(t, log=True) and common.drawable(v, log=True)]
        if bound:
            ax.plot([t for t, _ in bound], [v for _, v in bound], "x", color="black",
                    markersize=10, gid=f"input-bound:{s['model']}")
        rate = [(t, v) for t, v in zip(s["threads"], s["loader"])
                if common.drawable(t, log=True) and common.drawable(v, log=True)]
        ax.plot([t for t, _ in rate], [v for _, v in rate], "s--", color=color,
                label=f"{s['model']}: the loader's rate", gid=f"loader:{s['model']}")
        if common.drawable(s["synthetic"], log=True):
            ax.axhline(s["synthetic"], color=color, linestyle=":",
                       label=f"{s['model']}: synthetic data (the step's rate)",
                       gid=f"synthetic:{s['model']}")
    ax.set_xscale("log", base=2)
    threads = sorted({t for g in found[:2] for t in series(g)["threads"]
                      if common.drawable(t, log=True)})
    ax.set_xticks(threads)
    ax.set_xticklabels([str(t) for t in threads])
    ax.set_xlabel("loader threads")
    ax.set_yscale("log")  # the loader's rate and the step's can be tenfold apart
    ax.set_ylabel("images/s (log)")
    ax.grid(alpha=0.3, which="both")
    ax.set_title(f"Input pipeline: {common.describe([r for g in found for r in g])}"
                 + (f" ({len(found) - 2} more configs not drawn)" if len(found) > 2 else ""),
                 fontsize=9)
    ax.legend(fontsize=7)
    return fig


def table(records: list[Record]) -> tuple[list[str], list[list[str]]] | None:
    """The figures the plot draws: each JPEG point's threads, throughput, the loader's rate, the
    wait's share of the step and the verdict, beside its synthetic point's throughput."""
    found = groups(records)
    if not found:
        return None
    rows = []
    for g in found:
        s = series(g)
        jpeg = sorted((r for r in g if r.config.get("data") in _IMAGES and r.get("metrics.input")),
                      key=lambda r: r.need("metrics.input.threads"))
        for r, t, v, rate in zip(jpeg, s["threads"], s["throughput"], s["loader"]):
            rows.append([s["model"], str(t), common.number_text(v, ".1f"),
                         "" if rate is None else common.number_text(rate, ".0f"),
                         common.number_text(s["synthetic"], ".1f") if s["synthetic"] else "",
                         common.number_text(100 * r.need("metrics.input.wait_share_of_step"),
                                            ".1f") + "%",
                         str(r.need("metrics.input.verdict"))])
    return (["model", "loader threads", "img/s on JPEGs", "loader img/s", "img/s synthetic",
             "wait / step", "verdict"], rows)
