"""A Gantt chart of one traced step from the Chrome traces: compute, comm and copy lanes per
rank. Ranks' traces are put on one time axis through each trace's wall-clock origin."""
from __future__ import annotations

from pathlib import Path

from ..records import Record, RecordError, read_json_file, schema_enum, unreadable
from . import common

# Lanes by tid, and a colour per span category, from the names result.schema.json exports. The
# host lane holds the whole-step span, which the chart draws as its extent, not as a bar.
LANES = {tid: name for tid, name in enumerate(schema_enum("lane")) if name != "host"}
COLORS = {cat: f"C{i % 10}" for i, cat in enumerate(c for c in schema_enum("span_category")
                                                    if c != "step")}


def read_trace(path: Path) -> dict:
    if not Path(path).exists():
        raise RecordError(f"{path}: trace file is missing")
    trace = read_json_file(path, "a Chrome trace")
    if not isinstance(trace, dict) or "traceEvents" not in trace:
        raise RecordError(f"{path}: not a Chrome trace (no traceEvents)")
    return trace


def one_step(traces: list[dict]) -> tuple[list[dict], float, float]:
    """The events of the first traced step of rank 0, from every rank, on rank 0's time axis
    (microseconds). Returns (events with 'rank' and 't0' shifted, start, end)."""
    origins = [t.get("otherData", {}).get("origin_unix_us", 0.0) for t in traces]
    events = []
    for trace, origin in zip(traces, origins):
        shift = origin - origins[0]
        for e in trace["traceEvents"]:
            if e.get("ph") == "X":
                events.append(dict(e, ts=e["ts"] + shift))
    steps = sorted((e for e in events if e.get("cat") == "step" and e["pid"] == 0),
                   key=lambda e: e["ts"])
    if not steps:
        raise RecordError("trace has no step span on rank 0")
    start, end = steps[0]["ts"], steps[0]["ts"] + steps[0]["dur"]
    step_no = steps[0].get("args", {}).get("step")
    chosen = [e for e in events if e.get("args", {}).get("step") == step_no
              and e.get("tid") in LANES]
    if chosen:
        start = min(start, min(e["ts"] for e in chosen))
        end = max(end, max(e["ts"] + e["dur"] for e in chosen))
    return chosen, start, end


def render(record: Record, trace_paths: list[Path]):
    traces = [read_trace(p) for p in trace_paths]
    events, start, end = one_step(traces)
    ranks = sorted({e["pid"] for e in events})
    rows = [(rank, tid) for rank in ranks for tid in LANES]
    fig, ax = common.figure(11.0, 0.45 * len(rows) + 2.2)
    seen = set()
    for y, (rank, tid) in enumerate(rows):
        for cat, color in COLORS.items():
            bars = [((e["ts"] - start) / 1e3, e["dur"] / 1e3) for e in events
                    if e["pid"] == rank and e["tid"] == tid and e.get("cat") == cat]
            if not bars:
                continue
            ax.broken_barh(bars, (y - 0.4, 0.8), facecolors=color,
                           label=None if cat in seen else cat, gid=f"lane:{rank}:{tid}:{cat}")
            seen.add(cat)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"rank {r} {LANES[t]}" for r, t in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, (end - start) / 1e3)
    ax.set_xlabel("time since the step began (ms)")
    ax.grid(axis="x", alpha=0.3)
    c = record.config
    ax.set_title(f"One traced step: {common.describe([record])}\n"
                 f"{c.get('ranks')} ranks, overlap={c.get('overlap')}, batch {c.get('batch')} "
                 f"per rank, {c.get('image_size')}px", fontsize=10)
    ax.legend(fontsize=7, loc="upper right", ncol=4)
    return fig


def trace_files(record: Record, resolve) -> list[Path]:
    paths = record.get("paths.traces") or ([record.get("paths.trace")]
                                           if record.get("paths.trace") else [])
    return [resolve(p) for p in paths]


def unreadable_traces(record: Record, resolve) -> list[str]:
    """Why each trace of `record` that exists cannot be read: "PATH: a FIFO, not a regular
    file", or over records.MAX_FILE_BYTES. A path a record names may be anything."""
    out = []
    for p in trace_files(record, resolve):
        why = unreadable(p) if p.exists() else None
        if why is not None:
            out.append(f"{p}: {why}")
    return out


def pick(records: list[Record], resolve, skipped: list[str] | None = None) -> Record | None:
    """The point to draw: most ranks, overlap=backward first, among ok points with traces that are
    regular files within the size limit. Each point passed over for a trace that is not is added
    to `skipped`, with the reason."""
    candidates = []
    for r in records:
        if not (r.ok and trace_files(r, resolve)
                and all(p.exists() for p in trace_files(r, resolve))):
            continue
        why = unreadable_traces(r, resolve)
        if why:
            if skipped is not None:
                skipped += [f"the timeline of point {r.data['point']['index']}: trace {w}"
                            for w in why]
            continue
        candidates.append(r)
    if not candidates:
        return None
    order = {"backward": 0, "forward": 1, "none": 2}
    return min(candidates, key=lambda r: (-r.config.get("ranks", 1),
                                          order.get(r.config.get("overlap", "none"), 3),
                                          r.data["point"]["index"]))
