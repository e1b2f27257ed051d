"""A Gantt chart of one traced step from the Chrome traces: compute, comm, copy and loader lanes
per rank, each split into sub-lanes where its spans overlap (all-reduce buckets in flight
together).
The step drawn is the median-length one of rank 0's traced steps, and the title says so. Ranks'
traces are put on one time axis through each trace's wall-clock origin."""
from __future__ import annotations

from pathlib import Path

import matplotlib

from ..records import Record, RecordError, read_json_file, schema_enum, unreadable
from . import common

# The caption under the figure in the report.
NOTE = ("One traced step of every rank on one time axis: compute, communication and copy "
        "lanes, a colour per kind of pass; all-reduce buckets in flight together on "
        "sub-lanes, each named. With JPEG input, a lane per loader thread: the batches it made "
        "while the step ran, for the steps after it.")

# Lanes by tid, and a colour per span category, from the names result.schema.json exports. The
# host lane holds the whole-step span, which the chart draws as its extent, not as a bar. The
# loader's worker threads take the loader's tid and those after it, one each.
_LANE_NAMES = schema_enum("lane")
_LOADER_TID = _LANE_NAMES.index("loader")


def lane_label(tid) -> str | None:
    """A drawn lane's name for a tid ("loader 1" for the loader's second thread); None for the
    host lane and for a tid no lane has."""
    if isinstance(tid, bool) or not isinstance(tid, int) or tid < 0:
        return None
    if tid >= _LOADER_TID:
        return f"loader {tid - _LOADER_TID}"
    return None if _LANE_NAMES[tid] == "host" else _LANE_NAMES[tid]
# tab20's ten hues first, then their light shades: a distinct colour for each of up to 20 kinds
# of pass (matplotlib's default cycle has 10, and drew the optimizer in the forward pass's blue).
_PALETTE = [matplotlib.colormaps["tab20"](i) for i in (*range(0, 20, 2), *range(1, 20, 2))]
_CATEGORIES = [c for c in schema_enum("span_category") if c != "step"]
if len(_CATEGORIES) > len(_PALETTE):
    raise RuntimeError(f"{len(_CATEGORIES)} span categories, more than {len(_PALETTE)} colours")
COLORS = {cat: _PALETTE[i] for i, cat in enumerate(_CATEGORIES)}


def read_trace(path: Path) -> dict:
    if not Path(path).exists():
        raise RecordError(f"{path}: trace file is missing")
    trace = read_json_file(path, "a Chrome trace")
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise RecordError(f"{path}: not a Chrome trace (no traceEvents list)")
    return drawable_spans(trace)


def drawable_spans(trace: dict) -> dict:
    """The trace with only the spans ("X" events) whose start and length a plot can draw
    (common.drawable: a span of 1e308 us failed inside matplotlib); how many were left out is
    trace["left_out"], which the title says. An origin that is no such number counts as 0."""
    events = [e for e in trace["traceEvents"] if isinstance(e, dict)]
    spans = [e for e in events if e.get("ph") == "X"]
    kept = [e for e in spans if common.drawable(e.get("ts")) and common.drawable(e.get("dur"))]
    other = trace.get("otherData")
    origin = other.get("origin_unix_us", 0.0) if isinstance(other, dict) else 0.0
    return dict(trace, traceEvents=[e for e in events if e.get("ph") != "X"] + kept,
                otherData={"origin_unix_us": origin if common.drawable(origin) else 0.0},
                left_out=len(spans) - len(kept))


def chosen_step(traces: list[dict]) -> tuple[int, str]:
    """The traced step to draw, and why: of rank 0's traced steps, the one of median length (the
    shorter of the two middle ones for an even count), so that the chart shows a typical step,
    not the first."""
    steps = sorted((e for e in traces[0]["traceEvents"]
                    if e.get("ph") == "X" and e.get("cat") == "step"),
                   key=lambda e: (e["dur"], e["ts"]))
    if not steps:
        raise RecordError("trace has no step span on rank 0")
    chosen = steps[(len(steps) - 1) // 2]
    numbers = sorted(e.get("args", {}).get("step") for e in steps)
    if len(steps) == 1:
        return chosen["args"].get("step"), "the only traced step"
    return (chosen["args"].get("step"),
            f"the median-length one of the {len(steps)} traced steps "
            f"({numbers[0]}-{numbers[-1]}; rank 0's step times)")


def one_step(traces: list[dict], step_no: int | None = None) -> tuple[list[dict], float, float]:
    """The events of one traced step (chosen_step's unless given) from every rank, on rank 0's
    time axis (microseconds). Returns (events with 'ts' shifted, start, end)."""
    if step_no is None:
        step_no = chosen_step(traces)[0]
    origins = [t.get("otherData", {}).get("origin_unix_us", 0.0) for t in traces]
    events = []
    for trace, origin in zip(traces, origins):
        shift = origin - origins[0]
        for e in trace["traceEvents"]:
            if e.get("ph") == "X":
                events.append(dict(e, ts=e["ts"] + shift))
    steps = [e for e in events if e.get("cat") == "step" and e["pid"] == 0
             and e.get("args", {}).get("step") == step_no]
    if not steps:
        raise RecordError(f"trace has no span of step {step_no} on rank 0")
    start, end = steps[0]["ts"], steps[0]["ts"] + steps[0]["dur"]
    chosen = [e for e in events if e.get("args", {}).get("step") == step_no
              and lane_label(e.get("tid")) is not None and not _is_loader(e)]
    if chosen:
        start = min(start, min(e["ts"] for e in chosen))
        end = max(end, max(e["ts"] + e["dur"] for e in chosen))
    # The loader's threads: what they did while the step ran (making the batches of the steps
    # after it), cut to the step's extent.
    for e in events:
        if _is_loader(e) and e["ts"] < end and e["ts"] + e["dur"] > start:
            ts = max(e["ts"], start)
            chosen.append(dict(e, ts=ts, dur=min(e["ts"] + e["dur"], end) - ts))
    return chosen, start, end


def _is_loader(e: dict) -> bool:
    return isinstance(e.get("tid"), int) and not isinstance(e.get("tid"), bool) \
        and e["tid"] >= _LOADER_TID


def sub_lanes(events: list[dict]) -> list[int]:
    """Each event's sub-lane within its lane: spans that overlap in time (buckets in flight
    together) go on different sub-lanes, each on the lowest whose last span has ended; spans one
    after another share one."""
    ends: list[float] = []
    out = [0] * len(events)
    for i in sorted(range(len(events)), key=lambda i: (events[i]["ts"], -events[i]["dur"])):
        e = events[i]
        free = next((k for k, end in enumerate(ends) if end <= e["ts"]), None)
        if free is None:
            ends.append(0.0)
            free = len(ends) - 1
        ends[free] = e["ts"] + e["dur"]
        out[i] = free
    return out


def render(record: Record, trace_paths: list[Path]):
    traces = [read_trace(p) for p in trace_paths]
    step_no, why = chosen_step(traces)
    events, start, end = one_step(traces, step_no)
    ranks = sorted({e["pid"] for e in events})
    rows = []  # (rank, tid, sub-lane, its events); lanes no rank used in this step are left out
    used = sorted({e["tid"] for e in events})
    for rank in ranks:
        for tid in used:
            lane = [e for e in events if e["pid"] == rank and e["tid"] == tid]
            subs = sub_lanes(lane)
            for sub in range(max(subs, default=0) + 1):
                rows.append((rank, tid, sub, [e for e, k in zip(lane, subs) if k == sub]))
    fig, ax = common.figure(11.0, 0.45 * len(rows) + 2.8)
    seen = set()
    for y, (rank, tid, sub, lane) in enumerate(rows):
        for cat, color in COLORS.items():
            spans = [e for e in lane if e.get("cat") == cat]
            if not spans:
                continue
            ax.broken_barh([((e["ts"] - start) / 1e3, e["dur"] / 1e3) for e in spans],
                           (y - 0.4, 0.8), facecolors=color,
                           label=None if cat in seen else cat,
                           gid=f"lane:{rank}:{tid}:{sub}:{cat}")
            seen.add(cat)
        for e in lane:  # each all-reduce says its bucket, where the bar has room
            bucket = e.get("args", {}).get("bucket")
            if e.get("cat") == "allreduce" and bucket is not None \
                    and e["dur"] > 0.04 * (end - start):
                text = f"b{bucket}" if isinstance(bucket, int) else str(bucket)
                ax.text((e["ts"] - start + e["dur"] / 2) / 1e3, y, text, fontsize=6,
                        ha="center", va="center", color="white", gid=f"bucket:{rank}:{bucket}")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"rank {r} {lane_label(t)}" + (f" ({k + 1})" if k else "")
                        for r, t, k, _ in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, (end - start) / 1e3)
    ax.set_xlabel("time since the step began (ms)")
    ax.grid(axis="x", alpha=0.3)
    c = record.config
    n = c.get("ranks")
    stacked = any(k for _, _, k, _ in rows)
    left_out = sum(t["left_out"] for t in traces)
    ax.set_title(f"Step {step_no}, {why}: {common.describe([record])}\n"
                 f"{n} rank{'' if n == 1 else 's'}, overlap={c.get('overlap')}, batch "
                 f"{c.get('batch')} per rank, {c.get('image_size')}px"
                 + ("; spans at once (buckets in flight together) on sub-lanes (2), (3), ..."
                    if stacked else "")
                 + (f"; {left_out} spans left out (a time no plot can draw)" if left_out else ""),
                 fontsize=9)
    # Below the chart: a legend inside it would hide the bars it names.
    # 0.55 inch under the axes, below the tick labels and the axis label, however many rows.
    below = 0.55 / (fig.get_figheight() * ax.get_position().height)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -below), ncol=8,
              frameon=False)
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
