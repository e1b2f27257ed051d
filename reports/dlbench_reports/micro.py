"""The micro suite's report (`dlbench --suite=micro`): tables and plots of OUT/micro.json (Google
Benchmark's JSON from build/suites/dlbench_micro) and OUT/allreduce-<comm>.json (`dlbench bench
allreduce`, one per communicator), every row with its fraction of the machine's measured peak.

Rows are named kind/backend/...: gemm/<backend>/<precision>/<MxNxK>/<pass>,
conv/<backend>/<precision>/<algorithm>/<model>.<layer>/<pass>, copy/cuda/<pinned|pageable>/<size>.
Their counters: FLOP/s or bytes/s, and of_peak (the rate over the peak's; suites/micro/micro.h).
The peak is in the JSON's context ("peak <backend> <precision> flops_per_s" and "... bytes_per_s").
Copies are a fraction of the link's measured peak (their counter link_peak_bytes_per_s); all-reduce
rows of the
host's memory bandwidth (CPU, MPI through shared memory) or of the GPU's (NCCL).

read_micro checks the whole shape of both files before anything is written, and refuses what the
report cannot use with a RecordError naming the file and the key (one line, exit 2): a name that is
not a string, a row of a known kind whose name has the wrong parts or whose counters are not
numbers, a peak that is not a positive number, all-reduce rows that are not a list of rows with
every column. A counter that is not finite (Google Benchmark writes NaN and Infinity for a rate
over a zero time or peak) is read and shown as n/a, and drawn as nothing. Each conv plot draws at
most MAX_CONV_LAYERS_DRAWN layers, the ones furthest from the peak, and says how many it left
out: its size does not grow with the rows.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from .plots import common
from .outputs import check_directory, check_output, write_text_atomically
from .records import RESULT_SCHEMA, RecordError, read_json_file

PASSES = ("forward", "backward_data", "backward_filter")
GEMM_PASSES = ("forward", "backward_data", "backward_weights")
UNITS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}  # Google Benchmark's time_unit, in ms
# A row's name: kind/backend/... with these parts, and the counter that is its rate.
NAME_PARTS = {"gemm": ("gemm", "backend", "precision", "MxNxK", "pass"),
              "conv": ("conv", "backend", "precision", "algorithm", "model.layer", "pass"),
              "copy": ("copy", "backend", "memory", "size")}
RATE = {"gemm": "FLOP/s", "conv": "FLOP/s", "copy": "bytes/s"}
ALLREDUCE_COLUMNS = ("time_s", "algbw_gbs", "busbw_gbs", "reference_busbw_gbs")
MAX_CONV_LAYERS_DRAWN = 48  # resnet50 and vgg16 have 32 distinct convolutions


def _config_enum(key: str) -> list[str]:
    """The backends and precisions a record's config allows (result.schema.json), which the micro
    rows are named with."""
    schema = json.loads(RESULT_SCHEMA.read_text())
    return schema["properties"]["config"]["properties"][key]["enum"]


BACKENDS = _config_enum("backend")
PRECISIONS = _config_enum("precision")


@dataclass
class Row:
    kind: str      # gemm, conv, copy
    backend: str
    precision: str
    algorithm: str
    what: str      # the GEMM shape, model.layer, or copy size
    pass_: str
    ms: float | None    # None: not a finite number in micro.json (shown as n/a)
    rate: float | None  # FLOP/s or bytes/s
    of_peak: float | None
    label: str


@dataclass
class Micro:
    """micro.json, checked: its context, rows, failed rows and peaks."""
    context: dict
    rows: list[Row]
    failed: list[tuple[str, str]]
    peaks: dict[tuple[str, str], dict]


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _finite_or_none(v) -> float | None:
    """A JSON number as a float, None when it is not finite (NaN, Infinity, 1e999, 10^400)."""
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def _shown(value) -> str:
    """A value as a message shows it: JSON, on one line, at most 60 characters."""
    return json.dumps(value)[:60]


def _number(b: dict, key: str, where: str) -> float | None:
    if key not in b:
        raise RecordError(f"{where}: '{key}' is missing")
    if not _is_number(b[key]):
        raise RecordError(f"{where}: '{key}' must be a number, got {_shown(b.get(key))}")
    return _finite_or_none(b[key])


def _one_of(value: str, allowed, what: str, where: str) -> str:
    if value not in allowed:
        raise RecordError(f"{where}: unknown {what} {_shown(value)} (expected "
                          f"{', '.join(allowed)})")
    return value


def parse_row(b: dict, where: str) -> Row | None:
    """One benchmark entry that did not fail, checked; None for a row of another kind (Google
    Benchmark's own BM_ rows)."""
    name = b["name"]
    parts = name.removesuffix("/manual_time").split("/")
    kind = parts[0]
    if kind not in NAME_PARTS:
        return None
    if len(parts) != len(NAME_PARTS[kind]):
        raise RecordError(f"{where}: {_shown(name)}: not a dlbench micro row (expected "
                          f"{'/'.join(NAME_PARTS[kind])})")
    backend = _one_of(parts[1], BACKENDS, "backend", where)
    if kind == "copy":
        precision, algorithm, what, pass_ = "-", parts[2], parts[3], "host_to_device"
    else:
        precision = _one_of(parts[2], PRECISIONS, "precision", where)
        algorithm = "matmul" if kind == "gemm" else parts[3]
        what = parts[3] if kind == "gemm" else parts[4]
        pass_ = _one_of(parts[-1], GEMM_PASSES if kind == "gemm" else PASSES, "pass", where)
    unit = b.get("time_unit")
    if not isinstance(unit, str) or unit not in UNITS:
        raise RecordError(f"{where}: 'time_unit' must be one of {', '.join(UNITS)}")
    real_time = _number(b, "real_time", where)
    label = b.get("label", "")
    if not isinstance(label, str):
        raise RecordError(f"{where}: 'label' must be a string")
    return Row(kind, backend, precision, algorithm, what, pass_,
               None if real_time is None else real_time * UNITS[unit],
               _number(b, RATE[kind], where), _number(b, "of_peak", where), label)


def _benchmarks(data, where: str) -> list:
    if (not isinstance(data, dict) or not isinstance(data.get("context"), dict)
            or not isinstance(data.get("benchmarks", []), list)):
        raise RecordError(f"{where}: not Google Benchmark's JSON output (an object with a "
                          "'context' object and a 'benchmarks' list)")
    return data.get("benchmarks", [])


def _entries(data, where: str):
    """(where, entry) per benchmark, each an object with a string name."""
    for i, b in enumerate(_benchmarks(data, where)):
        at = f"{where}: benchmarks[{i}]"
        if not isinstance(b, dict) or not isinstance(b.get("name"), str):
            raise RecordError(f"{at}: a benchmark entry must be an object with a string 'name'")
        if not isinstance(b.get("error_occurred", False), bool):
            raise RecordError(f"{at}: 'error_occurred' must be true or false")
        yield at, b


def parse_rows(data: dict, where: str) -> list[Row]:
    """The rows of micro.json that ran, checked (RecordError naming the file and the entry)."""
    rows = []
    for at, b in _entries(data, where):
        if b.get("error_occurred"):
            continue  # listed by failed_rows
        row = parse_row(b, at)
        if row is not None:
            rows.append(row)
    return rows


def failed_rows(data: dict, where: str = "micro.json") -> list[tuple[str, str]]:
    """(name, message) of the rows that failed (an exception in the row: SkipWithError)."""
    out = []
    for at, b in _entries(data, where):
        if b.get("error_occurred"):
            message = b.get("error_message", "failed")
            if not isinstance(message, str):
                raise RecordError(f"{at}: 'error_message' must be a string")
            out.append((b["name"].removesuffix("/manual_time"), message))
    return out


def _peak_value(key: str, value, where: str) -> float:
    """A peak as the context holds it: a number, or its text ("2.0844e+11")."""
    try:
        v = float(value) if isinstance(value, str) or _is_number(value) else None
    except (ValueError, OverflowError):
        v = None
    if v is None or not math.isfinite(v) or v <= 0:
        raise RecordError(f"{where}: context {_shown(key)}: expected a positive number, got "
                          f"{_shown(value)}")
    return v


def peaks(context: dict, where: str = "micro.json") -> dict[tuple[str, str], dict]:
    """{(backend, precision): {"flops_per_s", "bytes_per_s", "method"}} from the context."""
    out: dict[tuple[str, str], dict] = {}
    for key, value in context.items():
        parts = key.split(" ")
        if len(parts) != 4 or parts[0] != "peak":
            continue
        entry = out.setdefault((parts[1], parts[2]), {})
        if parts[3] == "method":
            if not isinstance(value, str):
                raise RecordError(f"{where}: context {_shown(key)} must be a string")
            entry["method"] = value
        elif parts[3] in ("flops_per_s", "bytes_per_s"):
            entry[parts[3]] = _peak_value(key, value, where)
    return out


def read_allreduce(path: Path) -> dict:
    """An allreduce-<comm>.json (`dlbench bench allreduce`), checked: 'rows' a list of objects
    with an integer 'bytes' and a number in each column (not finite: n/a)."""
    data = read_json_file(path, "all-reduce results", allow_non_finite=True)
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise RecordError(f"{path}: not `dlbench bench allreduce` results (an object with a "
                          "'rows' list)")
    for key in ("comm", "buffers"):
        if key in data and not isinstance(data[key], str):
            raise RecordError(f"{path}: '{key}' must be a string")
    rows = []
    for i, row in enumerate(data["rows"]):
        at = f"{path}: rows[{i}]"
        if not isinstance(row, dict):
            raise RecordError(f"{at}: an all-reduce row must be an object")
        if not isinstance(row.get("bytes"), int) or isinstance(row["bytes"], bool):
            raise RecordError(f"{at}: 'bytes' must be an integer")
        rows.append(dict(row, **{k: _number(row, k, at) for k in ALLREDUCE_COLUMNS}))
    return dict(data, rows=rows)


def read_micro(path: Path) -> Micro:
    """micro.json, checked whole before the report writes anything."""
    data = read_json_file(path, "Google Benchmark results", allow_non_finite=True)
    where = str(path)
    _benchmarks(data, where)
    return Micro(data["context"], parse_rows(data, where), failed_rows(data, where),
                 peaks(data["context"], where))


def furthest_from_peak(rows: list[Row], n: int = 3) -> list[tuple[Row, list[Row]]]:
    """Per backend and precision, the (layer, pass) convolutions whose best algorithm is furthest
    below the peak: the best row of each, lowest first, with the other algorithms' rows."""
    best: dict[tuple, list[Row]] = {}
    for r in rows:
        if r.kind == "conv" and r.of_peak is not None:
            best.setdefault((r.backend, r.precision, r.what, r.pass_), []).append(r)
    ranked = sorted(((max(rs, key=lambda r: r.of_peak), rs) for rs in best.values()),
                    key=lambda t: t[0].of_peak)
    out, per = [], {}
    for top, rs in ranked:
        k = (top.backend, top.precision)
        if per.get(k, 0) < n:
            per[k] = per.get(k, 0) + 1
            out.append((top, rs))
    order = {p: i for i, p in enumerate(("fp32", "tf32", "bf16", "fp16"))}
    return sorted(out, key=lambda t: (t[0].backend, order.get(t[0].precision, 9),
                                      t[0].of_peak))


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.0f}%"


def _num(v: float | None, spec: str, scale: float = 1.0) -> str:
    """A value of a table, divided by `scale`; n/a where micro.json's was not finite."""
    return "n/a" if v is None else f"{v / scale:{spec}}"


def _conv_lines(conv: list[Row]) -> list[str]:
    """The convolutions' table, then the passes furthest from the peak."""
    out = ["", "## Convolutions of resnet50 and vgg16", "",
           "Each cell: GFLOP/s and the fraction of the peak. "
           "Shape: batch x channels x height x width, kernel, stride, padding -> out channels.",
           "", "| backend | precision | algorithm | layer | shape | forward | backward_data | "
           "backward_filter |", "|---|---|---|---|---|---|---|---|"]
    cells: dict[tuple, dict[str, Row]] = {}
    for r in conv:
        cells.setdefault((r.backend, r.precision, r.algorithm, r.what), {})[r.pass_] = r
    for (backend, precision, algorithm, what), by_pass in cells.items():
        shape = next(iter(by_pass.values())).label.split(";")[0]
        tds = [f"{_num(by_pass[p].rate, '.1f', 1e9)} ({_pct(by_pass[p].of_peak)})"
               if p in by_pass else "-" for p in PASSES]
        out.append(f"| {backend} | {precision} | {algorithm} | {what} | {shape} | "
                   + " | ".join(tds) + " |")
    out += ["", "### Furthest from the peak", "",
            "The convolution passes whose best algorithm reaches the least of the peak:", ""]
    for top, rs in furthest_from_peak(conv):
        others = ", ".join(f"{r.algorithm} {_pct(r.of_peak)}" for r in rs)
        out.append(f"- {top.backend} {top.precision}: {top.what} {top.pass_}: "
                   f"{_pct(top.of_peak)} at best ({others}); {top.label.split(';')[0]}")
    return out


def _allreduce_lines(allreduce: dict, pk: dict) -> list[str]:
    """One all-reduce sweep's table, each size's bus bandwidth against the memory's."""
    backend = "cuda" if allreduce.get("buffers") == "cuda" else "cpu"
    bw = pk.get((backend, "fp32"), {}).get("bytes_per_s")
    out = ["", f"## All-reduce ({allreduce.get('comm')}, {allreduce.get('ranks')} ranks)",
           "", f"busbw = algbw x 2(n-1)/n, as nccl-tests; of peak: busbw over the "
           f"{backend}'s measured memory bandwidth.", "",
           "| bytes | time us | algbw GB/s | busbw GB/s | of peak | library's own busbw |",
           "|---|---|---|---|---|---|"]
    for row in allreduce["rows"]:
        busbw = row["busbw_gbs"]
        frac = _pct(busbw * 1e9 / bw) if bw and busbw is not None else "n/a"
        out.append(f"| {row['bytes']} | {_num(row['time_s'], '.1f', 1e-6)} | "
                   f"{_num(row['algbw_gbs'], '.3f')} | {_num(busbw, '.3f')} | {frac} | "
                   f"{_num(row['reference_busbw_gbs'], '.3f')} |")
    return out


def markdown(rows: list[Row], context: dict, allreduces: list[dict],
             failed: list[tuple[str, str]] = ()) -> str:
    pk = peaks(context)
    out = ["# dlbench micro-benchmarks", "",
           f"Host {context.get('host_name', '?')}, {context.get('num_cpus', '?')} CPUs; "
           f"GPU rows: {context.get('gpu rows', '?')}.", "", "## The peak each row is a fraction of",
           "", "| backend | precision | FLOP/s | bytes/s | how |", "|---|---|---|---|---|"]
    for (backend, precision), p in sorted(pk.items()):
        flops = f"{p['flops_per_s'] / 1e9:.1f} G" if "flops_per_s" in p else "-"
        out.append(f"| {backend} | {precision} | {flops} | "
                   f"{p.get('bytes_per_s', 0) / 1e9:.1f} G | {p.get('method', '')} |")
    if failed:
        out += ["", f"## Rows that failed ({len(failed)})", ""]
        out += [f"- `{name}`: {message}" for name, message in failed]
    gemm = [r for r in rows if r.kind == "gemm"]
    if gemm:
        out += ["", "## GEMM at the models' linear layers", "",
                "| backend | precision | M x N x K | pass | ms | GFLOP/s | of peak | layers |",
                "|---|---|---|---|---|---|---|---|"]
        for r in gemm:
            out.append(f"| {r.backend} | {r.precision} | {r.what} | {r.pass_} | "
                       f"{_num(r.ms, '.3f')} | {_num(r.rate, '.1f', 1e9)} | {_pct(r.of_peak)} | "
                       f"{r.label} |")
    conv = [r for r in rows if r.kind == "conv"]
    if conv:
        out += _conv_lines(conv)
    copies = [r for r in rows if r.kind == "copy"]
    if copies:
        out += ["", "## Host-to-device copies", "",
                "Fraction of the link's measured peak (the best pinned copy of 256 MiB; "
                "each row's counter `link_peak_bytes_per_s`).",
                "", "| memory | size | ms | GB/s | of peak |", "|---|---|---|---|---|"]
        for r in copies:
            out.append(f"| {r.algorithm} | {r.what} | {_num(r.ms, '.3f')} | "
                       f"{_num(r.rate, '.2f', 1e9)} | {_pct(r.of_peak)} |")
    for allreduce in allreduces:
        out += _allreduce_lines(allreduce, pk)
    return "\n".join(out) + "\n"


def best_per_pass(conv: list[Row]) -> dict[tuple[str, str], Row]:
    """{(layer, pass): the row of its best algorithm}, over rows with a finite fraction."""
    best: dict[tuple[str, str], Row] = {}
    for r in conv:
        k = (r.what, r.pass_)
        if r.of_peak is not None and (k not in best or r.of_peak > best[k].of_peak):
            best[k] = r
    return best


def layers_drawn(layers: list[str], best: dict, limit: int) -> list[str]:
    """At most `limit` layers, in their order: all of them, or the ones furthest from the peak
    (by their lowest pass at its best algorithm; a layer with no finite fraction first)."""
    if len(layers) <= limit:
        return layers
    def lowest(w):
        fractions = [best[(w, p)].of_peak for p in PASSES if (w, p) in best]
        return min(fractions) if fractions else -1.0
    keep = set(sorted(layers, key=lowest)[:limit])
    return [w for w in layers if w in keep]


def conv_plot(rows: list[Row], backend: str, precision: str,
              limit: int = MAX_CONV_LAYERS_DRAWN):
    """Per distinct convolution, the best algorithm's fraction of the peak in each pass; at most
    `limit` of them, the figure's size bounded, and a note of what is left out."""
    conv = [r for r in rows if r.kind == "conv" and r.backend == backend
            and r.precision == precision]
    if not conv:
        return None
    all_layers = list(dict.fromkeys(r.what for r in conv))
    best = best_per_pass(conv)
    layers = layers_drawn(all_layers, best, limit)
    fig, ax = common.figure(width=max(8.0, 0.32 * len(layers)))
    width = 0.27
    undrawn = common.Undrawn()
    for i, p in enumerate(PASSES):
        xs = [j + (i - 1) * width for j in range(len(layers))]
        ax.bar(xs, [undrawn.keep(100 * best[(w, p)].of_peak, f"{w[:40]} {p} (% of the peak)")
                    if (w, p) in best else 0 for w in layers],
               width, label=p, gid=f"conv:{p}")
    ax.axhline(100, color="#888888", linestyle="--", linewidth=1, label="the measured peak")
    ax.set_xticks(range(len(layers)))
    ax.set_xticklabels([w[:40] for w in layers], rotation=90, fontsize=6)
    ax.set_ylabel("% of the peak (best algorithm per pass)")
    ax.set_title(f"Convolutions of resnet50 and vgg16 on {backend}, {precision}: "
                 "fraction of the measured peak", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    common.footnote(fig, conv_plot_note(conv, all_layers, layers), undrawn)
    return fig


def conv_plot_note(conv: list[Row], all_layers: list[str], layers: list[str]) -> str:
    """What the conv plot leaves out: layers past the limit, and rows with no finite fraction."""
    notes = []
    if len(layers) < len(all_layers):
        notes.append(f"{len(layers)} of {len(all_layers)} convolutions drawn: the "
                     f"{len(layers)} furthest from the peak (micro.md lists every row)")
    missing = sum(r.of_peak is None for r in conv)
    if missing:
        notes.append(f"{missing} rows with no finite fraction of the peak (n/a in micro.md) are "
                     "not drawn")
    return "; ".join(notes)


def render(directory: str | Path) -> tuple[Path, list[Path]]:
    """micro.md and a conv plot per backend and precision. Every input is read and checked
    before anything is written."""
    d = Path(directory)
    micro = read_micro(d / "micro.json")
    allreduces = [read_allreduce(f) for f in sorted(d.glob("allreduce-*.json"))]
    md = d / "micro.md"
    check_output(md, "report")
    check_directory(d / "plots", "plots", create=False)
    write_text_atomically(md, markdown(micro.rows, micro.context, allreduces, micro.failed))
    if micro.failed:
        print(f"micro: {len(micro.failed)} rows failed (listed in {md})")
    files: list[Path] = []
    rows = micro.rows
    for backend, precision in sorted({(r.backend, r.precision) for r in rows if r.kind == "conv"}):
        fig = conv_plot(rows, backend, precision)
        if fig is not None:
            files += common.save(fig, d / "plots", f"micro-conv-{backend}-{precision}")
    return md, files


def main(directory: str) -> int:
    md, files = render(directory)
    text = md.read_text()
    furthest = text.split("### Furthest from the peak", 1)
    if len(furthest) == 2:
        print("Furthest from the peak" + furthest[1].split("\n## ", 1)[0].rstrip())
    print(f"micro report: {md}; {len(files) // 2} plots in {Path(directory) / 'plots'}")
    return 0
