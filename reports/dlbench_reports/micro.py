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
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .plots import common
from .records import RecordError, read_json_file

PASSES = ("forward", "backward_data", "backward_filter")
GEMM_PASSES = ("forward", "backward_data", "backward_weights")


@dataclass
class Row:
    kind: str      # gemm, conv, copy
    backend: str
    precision: str
    algorithm: str
    what: str      # the GEMM shape, model.layer, or copy size
    pass_: str
    ms: float
    rate: float    # FLOP/s or bytes/s
    of_peak: float
    label: str


def _ms(b: dict) -> float:
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
    return b["real_time"] * scale


def parse_rows(data: dict, where: str) -> list[Row]:
    rows = []
    for b in data.get("benchmarks", []):
        if not isinstance(b, dict) or "name" not in b:
            raise RecordError(f"{where}: a benchmark entry without a name")
        if b.get("error_occurred"):
            continue  # listed by failed_rows
        parts = b["name"].removesuffix("/manual_time").split("/")
        try:
            if parts[0] == "gemm":
                _, backend, precision, shape, pass_ = parts
                algorithm = "matmul"
                rate = b["FLOP/s"]
            elif parts[0] == "conv":
                _, backend, precision, algorithm, shape, pass_ = parts
                rate = b["FLOP/s"]
            elif parts[0] == "copy":
                _, backend, algorithm, shape = parts
                precision, pass_, rate = "-", "host_to_device", b["bytes/s"]
            else:
                continue
            rows.append(Row(parts[0], backend, precision, algorithm, shape, pass_, _ms(b), rate,
                            b["of_peak"], b.get("label", "")))
        except (ValueError, KeyError) as e:
            raise RecordError(f"{where}: {b['name']}: not a dlbench micro row ({e})") from None
    return rows


def failed_rows(data: dict) -> list[tuple[str, str]]:
    """(name, message) of the rows that failed (an exception in the row: SkipWithError)."""
    return [(b["name"].removesuffix("/manual_time"), b.get("error_message", "failed"))
            for b in data.get("benchmarks", []) if isinstance(b, dict) and b.get("error_occurred")]


def peaks(context: dict) -> dict[tuple[str, str], dict]:
    """{(backend, precision): {"flops_per_s", "bytes_per_s", "method"}} from the context."""
    out: dict[tuple[str, str], dict] = {}
    for key, value in context.items():
        parts = key.split(" ")
        if len(parts) == 4 and parts[0] == "peak":
            entry = out.setdefault((parts[1], parts[2]), {})
            entry[parts[3]] = value if parts[3] == "method" else float(value)
    return out


def furthest_from_peak(rows: list[Row], n: int = 3) -> list[tuple[Row, list[Row]]]:
    """Per backend and precision, the (layer, pass) convolutions whose best algorithm is furthest
    below the peak: the best row of each, lowest first, with the other algorithms' rows."""
    best: dict[tuple, list[Row]] = {}
    for r in rows:
        if r.kind == "conv":
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


def _pct(v: float) -> str:
    return f"{100 * v:.0f}%"


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
            out.append(f"| {r.backend} | {r.precision} | {r.what} | {r.pass_} | {r.ms:.3f} | "
                       f"{r.rate / 1e9:.1f} | {_pct(r.of_peak)} | {r.label} |")
    conv = [r for r in rows if r.kind == "conv"]
    if conv:
        out += ["", "## Convolutions of resnet50 and vgg16", "",
                "Each cell: GFLOP/s and the fraction of the peak. "
                "Shape: batch x channels x height x width, kernel, stride, padding -> out channels.",
                "", "| backend | precision | algorithm | layer | shape | forward | backward_data | "
                "backward_filter |", "|---|---|---|---|---|---|---|---|"]
        cells: dict[tuple, dict[str, Row]] = {}
        for r in conv:
            cells.setdefault((r.backend, r.precision, r.algorithm, r.what), {})[r.pass_] = r
        for (backend, precision, algorithm, what), by_pass in cells.items():
            shape = next(iter(by_pass.values())).label.split(";")[0]
            tds = [f"{by_pass[p].rate / 1e9:.1f} ({_pct(by_pass[p].of_peak)})"
                   if p in by_pass else "-" for p in PASSES]
            out.append(f"| {backend} | {precision} | {algorithm} | {what} | {shape} | "
                       + " | ".join(tds) + " |")
        out += ["", "### Furthest from the peak", "",
                "The convolution passes whose best algorithm reaches the least of the peak:", ""]
        for top, rs in furthest_from_peak(conv):
            others = ", ".join(f"{r.algorithm} {_pct(r.of_peak)}" for r in rs)
            out.append(f"- {top.backend} {top.precision}: {top.what} {top.pass_}: "
                       f"{_pct(top.of_peak)} at best ({others}); {top.label.split(';')[0]}")
    copies = [r for r in rows if r.kind == "copy"]
    if copies:
        out += ["", "## Host-to-device copies", "",
                "Fraction of the link's measured peak (the best pinned copy of 256 MiB; "
                "each row's counter `link_peak_bytes_per_s`).",
                "", "| memory | size | ms | GB/s | of peak |", "|---|---|---|---|---|"]
        for r in copies:
            out.append(f"| {r.algorithm} | {r.what} | {r.ms:.3f} | {r.rate / 1e9:.2f} | "
                       f"{_pct(r.of_peak)} |")
    for allreduce in allreduces:
        backend = "cuda" if allreduce.get("buffers") == "cuda" else "cpu"
        bw = pk.get((backend, "fp32"), {}).get("bytes_per_s")
        out += ["", f"## All-reduce ({allreduce.get('comm')}, {allreduce.get('ranks')} ranks)",
                "", f"busbw = algbw x 2(n-1)/n, as nccl-tests; of peak: busbw over the "
                f"{backend}'s measured memory bandwidth.", "",
                "| bytes | time us | algbw GB/s | busbw GB/s | of peak | library's own busbw |",
                "|---|---|---|---|---|---|"]
        for row in allreduce.get("rows", []):
            frac = _pct(row["busbw_gbs"] * 1e9 / bw) if bw else "n/a"
            out.append(f"| {row['bytes']} | {row['time_s'] * 1e6:.1f} | {row['algbw_gbs']:.3f} | "
                       f"{row['busbw_gbs']:.3f} | {frac} | {row['reference_busbw_gbs']:.3f} |")
    return "\n".join(out) + "\n"


def conv_plot(rows: list[Row], backend: str, precision: str):
    """Per distinct convolution, the best algorithm's fraction of the peak in each pass."""
    conv = [r for r in rows if r.kind == "conv" and r.backend == backend
            and r.precision == precision]
    if not conv:
        return None
    layers = list(dict.fromkeys(r.what for r in conv))
    best = {}
    for r in conv:
        k = (r.what, r.pass_)
        if k not in best or r.of_peak > best[k].of_peak:
            best[k] = r
    fig, ax = common.figure(width=max(8.0, 0.32 * len(layers)))
    width = 0.27
    for i, p in enumerate(PASSES):
        xs = [j + (i - 1) * width for j in range(len(layers))]
        ax.bar(xs, [100 * best[(w, p)].of_peak if (w, p) in best else 0 for w in layers],
               width, label=p, gid=f"conv:{p}")
    ax.axhline(100, color="#888888", linestyle="--", linewidth=1, label="the measured peak")
    ax.set_xticks(range(len(layers)))
    ax.set_xticklabels(layers, rotation=90, fontsize=6)
    ax.set_ylabel("% of the peak (best algorithm per pass)")
    ax.set_title(f"Convolutions of resnet50 and vgg16 on {backend}, {precision}: "
                 "fraction of the measured peak", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    return fig


def render(directory: str | Path) -> tuple[Path, list[Path]]:
    d = Path(directory)
    data = read_json_file(d / "micro.json", "Google Benchmark results")
    if not isinstance(data, dict) or not isinstance(data.get("context"), dict):
        raise RecordError(f"{d / 'micro.json'}: not Google Benchmark's JSON output")
    rows = parse_rows(data, str(d / "micro.json"))
    allreduces = [read_json_file(f, "all-reduce results")
                  for f in sorted(d.glob("allreduce-*.json"))]
    md = d / "micro.md"
    failed = failed_rows(data)
    md.write_text(markdown(rows, data["context"], allreduces, failed))
    if failed:
        print(f"micro: {len(failed)} rows failed (listed in {md})")
    files: list[Path] = []
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
