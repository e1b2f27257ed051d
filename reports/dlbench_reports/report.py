"""report.md and report.html for one results directory: a summary table, the plots, the
environment, and every point's status, failures included."""
from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path

from . import peaks as peaks_mod
from .plots import (algorithms, batch, common, convergence, global_batch, input as input_plot,
                    memory, overlap, precision, scaling, scaling_loss, sync_modes, timeline,
                    tradeoff)
from . import headline, intervals, validation
from .outputs import check_directory, check_output, write_text_atomically
from .records import (Record, RecordError, ResultSet, efficiency, label, load, peer_ratio,
                      peer_record, peers, read_json_file, varying_keys)


@dataclass
class Plot:
    title: str
    name: str
    files: list[Path]
    # The figures the plot draws, as a table under it (header, rows), and how to read both.
    table: tuple[list[str], list[list[str]]] | None = None
    note: str = ""


@dataclass
class Report:
    directory: Path
    plots: list[Plot] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # inputs not read, each with the reason
    markdown: Path | None = None
    html: Path | None = None


def _against_ranks_and_batch(records: list[Record], measured: list[Record], add,
                             plots: list[Plot]) -> None:
    """render_plots' throughput plots: scaling and its loss (measured and simulated apart), then
    batch, one figure per setting."""
    for i, group in enumerate(scaling.groups(records).values()):
        add(scaling.render(group), "Scaling, simulated" if scaling.simulated(group[0]) else
            "Scaling", f"scaling-{i + 1}", note=scaling.caption(group))
    for i, group in enumerate(scaling_loss.groups(records).values()):
        add(scaling_loss.render(group), scaling_loss.title(group, [p.title for p in plots]),
            f"scaling-loss-{i + 1}", note=scaling_loss.NOTE)
    by_rest: dict[str, list[Record]] = {}
    for r in measured:
        key = json.dumps({k: v for k, v in r.point_config.items() if k not in ("batch", "system")},
                         sort_keys=True)
        by_rest.setdefault(key, []).append(r)
    n = 0
    for group in by_rest.values():
        fig = batch.render(group)
        if fig is not None:
            n += 1
            add(fig, "Batch size", f"batch-{n}", note=batch.NOTE)


def render_plots(rs: ResultSet, out_dir: Path, peaks: list[dict],
                 skipped: list[str] | None = None) -> list[Plot]:
    """Every plot the records call for; an input passed over (a trace that is not a regular file)
    is added to `skipped`, with the reason."""
    plots: list[Plot] = []
    records = rs.records

    def add(fig, title, name, table=None, note=""):
        if fig is not None:
            plots.append(Plot(title, name, common.save(fig, out_dir, name), table, note))

    # Throughput plots draw a peer's curve beside dlbench's; the plots of dlbench's insides
    # (memory by category, phases, timelines) take dlbench's records only.
    # Beside the scaling plots, measured records only: a simulated one has no memory, phases or
    # trace of a run.
    measured = [r for r in records if r.data.get("mode") != "simulated"]
    own = [r for r in measured if r.system == "dlbench"]
    _against_ranks_and_batch(records, measured, add, plots)
    # suite_config is any object the suite file wrote: compare its values as JSON text.
    if own and (len({json.dumps(r.point_config.get("precision", r.config.get("precision")))
                     for r in own}) > 1 or rs.suite == "precision"):
        add(precision.render(own, peaks), "Precision", "precision", note=precision.NOTE)
    add(convergence.render(own), "Time to accuracy", "convergence", note=convergence.NOTE)
    add(sync_modes.render(own), "Sync modes: time to accuracy and throughput", "sync-modes",
        note=sync_modes.NOTE)
    add(sync_modes.render_staleness(own), "Throughput against staleness", "staleness",
        note=sync_modes.STALENESS_NOTE)
    add(global_batch.render(own), "Accuracy against global batch", "global-batch",
        note=global_batch.NOTE)
    add(overlap.render(own), "Overlap", "overlap", overlap.table(own), overlap.NOTE)
    for i, group in enumerate(g for g in algorithms.groups(own) if algorithms.applies(g)):
        add(algorithms.render_layers(group, rs.resolve, skipped),
            "Convolution layers by algorithm", f"algorithms-layers-{i + 1}",
            note=algorithms.LAYER_NOTE)
        add(algorithms.render_limits(group), "Step time under workspace limits",
            f"algorithms-limits-{i + 1}", note=algorithms.LIMIT_NOTE)
    add(memory.render(own), "Memory", "memory", note=memory.NOTE)
    add(input_plot.render(own), "Input pipeline", "input", input_plot.table(own), input_plot.NOTE)
    add(tradeoff.render(own), "Memory techniques: saved and paid", "memory-tradeoff",
        tradeoff.table(own), tradeoff.NOTE)
    chosen = timeline.pick(own, rs.resolve, skipped)
    if chosen is not None:
        add(timeline.render(chosen, timeline.trace_files(chosen, rs.resolve)),
            f"Timeline of point {chosen.data['point']['index']}", "timeline", note=timeline.NOTE)
    return plots


def _fmt(v, spec=".2f", unit="") -> str:
    return "" if v is None else f"{common.number_text(v, spec)}{unit}"


def tta_text(r: Record, conv: dict) -> str:
    """"12.3 s to 95.0% (4 epochs)"; "reached 95.0% (4 epochs), time not recorded" where the
    record's time_to_accuracy_s is null (the schema allows it); or "not reached (...)"."""
    target = f"{common.number_text(100 * conv['target_accuracy'], '.1f')}%"
    if not conv["reached"]:
        accuracy = common.number_text(100 * r.get('metrics.test_accuracy', 0), '.1f')
        return (f"not reached ({accuracy}% after "
                f"{conv['epochs']} epochs)")
    if conv["time_to_accuracy_s"] is None:
        return f"reached {target} ({conv['epochs']} epochs), time not recorded"
    return (f"{common.number_text(conv['time_to_accuracy_s'], '.1f')} s to {target} "
            f"({conv['epochs']} epochs)")


def config_cell(value) -> str:
    """A config value as a table shows it: empty where the point has none (a measured point's
    network, a simulated point's jitter on a measured row), never 'None'; a whole number as one
    (25, not 25.0, whichever command wrote it)."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def noise_cell(r: Record) -> str:
    """'noisy', 'stable', or '' without a verdict: one word, so that the row stays one line; the
    reasons are listed under the table (noisy_lines)."""
    if common.noisy(r):
        return "noisy"
    return "stable" if r.get("noise.verdict") == "stable" else ""


def noisy_lines(rs: ResultSet) -> list[str]:
    """'point 9: <reasons>' (common.noisy: a bounded number) for each ok point measured on a noisy
    machine that says why."""
    return [f"point {r.data['point']['index']}: {reasons}" for r in rs.records
            if r.ok and (reasons := common.noisy(r)) and reasons != "noisy"]


def shown_config(r: Record, key: str) -> str:
    """A config column's cell: the point's suite value, else the run's; a simulated point's jitter
    as its replay applied it (a roofline has none to draw, whatever was asked)."""
    if key == "jitter" and isinstance(r.get("simulation.jitter"), str):
        return config_cell(r.get("simulation.jitter"))
    return config_cell(r.point_config.get(key, r.config.get(key)))


def summary_rows(rs: ResultSet, peaks: list[dict]) -> tuple[list[str], list[list[str]]]:
    # A key the suite sets for some points only (a simulated point's seed) but whose cells all
    # read the same is no column.
    keys = [k for k in varying_keys(rs.records)
            if len({shown_config(r, k) for r in rs.records}) > 1] or ["model"]
    others = peers(rs.records)
    header = ["#", *keys, "status", "img/s [95%]", *[f"vs {p} [95%]" for p in others],
              "step median ms",
              "p10-p90 ms", "efficiency", "peak MiB", "comm exposed/all ms", "MFU",
              "time to accuracy", "noise"]
    rows = []
    for r in rs.records:
        st = r.get("metrics.step_time_s") or {}
        comm = overlap.comm_parts(r)
        conv = r.get("metrics.convergence")
        eff = efficiency(r)
        tta = tta_text(r, conv) if conv else ""
        rows.append([
            str(r.data["point"]["index"]),
            *[shown_config(r, k) for k in keys],
            r.data["status"],
            intervals.ratio_text(r.get("metrics.throughput_img_s"),
                                 intervals.throughput_interval(r), ".2f", "", one=float("nan")),
            *[intervals.ratio_text(peer_ratio(r, rs.records, p), intervals.ratio_interval(
                r, peer_record(r, rs.records, p)) if peer_record(r, rs.records, p) else None)
              for p in others],
            _fmt(st.get("median") and st["median"] * 1e3, ".1f"),
            f"{_fmt(st['p10'] * 1e3, '.1f')}-{_fmt(st['p90'] * 1e3, '.1f')}" if st else "",
            intervals.ratio_text(eff and 100 * eff, intervals.efficiency_interval(r, rs.records),
                                 ".1f", "%", one=100.0),
            _fmt(r.get("memory.peak_bytes_total") and r.get("memory.peak_bytes_total") / common.MIB,
                 ".1f"),
            (f"{comm['exposed'] * 1e3:.1f} / " +
             ("n/a" if comm["comm"] is None else f"{comm['comm'] * 1e3:.1f}")) if comm else "",
            peaks_mod.mfu_text(r, peaks) if r.ok else "",
            tta,
            noise_cell(r),
        ])
    return without_empty_columns(header, rows, one_rank=all(
        r.config.get("ranks", 1) == 1 for r in rs.records))


# The columns every summary keeps, even empty: the point, its status and its throughput.
KEPT_COLUMNS = ("#", "status", "img/s [95%]")


def without_empty_columns(header: list[str], rows: list[list[str]],
                          one_rank: bool) -> tuple[list[str], list[list[str]]]:
    """The table less the columns no point has a value in (a suite that runs no all-reduce has no
    comm column, one that trains to no target no time to accuracy), and less the efficiency where
    every point ran on one rank (100% by definition)."""
    keep = [i for i, h in enumerate(header)
            if h in KEPT_COLUMNS or (any(row[i] for row in rows) and
                                     not (one_rank and h == "efficiency"))]
    return [header[i] for i in keep], [[row[i] for i in keep] for row in rows]


ENV_KEYS = ["host", "device", "cpu", "cpu_threads", "backend", "driver", "cuda", "cudnn", "nccl",
            "mpi", "blas", "git_sha", "dlbench_version", "time"]


PEER_ENV_KEYS = ["torch", "torchvision", "python", "comm", "cudnn", "nccl"]


def _points_text(indices: list[int]) -> str:
    """'points 1-3, 7': runs of consecutive indices."""
    runs: list[list[int]] = []
    for i in sorted(indices):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
    return ("point " if len(indices) == 1 else "points ") + text


def _values_text(key: str, seen: dict) -> str:
    """One value as it is; values that differ across points each with the points that had it
    (the times as their span)."""
    if len(seen) == 1:
        return str(next(iter(seen)))
    if key == "time":
        return f"{min(seen)} to {max(seen)}"
    return "; ".join(f"{v} ({_points_text(ix)})" for v, ix in seen.items())


def environment(rs: ResultSet) -> dict:
    """dlbench's environment over all its records, then each peer's versions (`<peer> <key>`).
    A value that differs across points is listed with each point's: a scaling sweep's 1-rank
    points run without MPI, its others with it."""
    by_key: dict[str, dict] = {}
    for r in rs.records:
        e = r.data.get("environment")
        if not e:
            continue
        keys = ENV_KEYS if r.system == "dlbench" else PEER_ENV_KEYS
        prefix = "" if r.system == "dlbench" else r.system + " "
        for k in keys:
            if k in e:
                seen = by_key.setdefault(prefix + k, {})
                # The schema leaves environment values untyped: compared and shown as text.
                seen.setdefault(str(e[k]), []).append(r.data["point"]["index"])
    own = [k for k in ENV_KEYS if k in by_key]
    return {k: _values_text(k.rsplit(" ", 1)[-1], by_key[k])
            for k in own + sorted(k for k in by_key if k not in own)}


# How to read each suite's report: what its table and plots answer, and what the figures mean.
HOW_TO_READ_COMMON = (
    "Each row is one point (a configuration run in its own processes). img/s is the images of "
    "the timed steps over their wall time, all ranks together; the step columns are per-step "
    "times over the same timed steps (median, and the 10th to 90th percentile). Efficiency is "
    "throughput over ranks times the 1-rank point's. comm exposed/all is the time per traced "
    "step in which an all-reduce runs with no compute, and in which one runs at all. MFU is "
    "achieved FLOP/s over the device's dense datasheet peak (reports/device_peaks.json), or, "
    "marked (m), over this machine's measured peak (the best matrix product dlbench bench peak "
    "found, measured once by the first CPU sweep): a fraction of what this machine's libraries "
    "reach, not of a datasheet, for the whole CPU (every rank on it counted) and, for 16-bit "
    "points, of their own precision's peak where the CPU has one (bf16 with AVX-512 BF16), else "
    "of the fp32 peak (the CPU computes them in f32); '(m, peak too low)' marks a run "
    "faster than that peak, whose BLAS was slower than the run's own kernels. noise is the point's "
    "verdict on the machine around it (other processes' CPU time, steal, oversubscription, the "
    "steps' spread): a noisy point's figures may not repeat. docs/metrics.md defines every "
    "figure.")
HOW_TO_READ = {
    "scaling": "Weak scaling: the batch per rank is fixed, so ideal throughput grows linearly "
               "with ranks and efficiency stays at 100%. Ranks that share one CPU's cores "
               "measure contention for those cores, not scaling; the plot marks them.",
    "batch": "Throughput and peak memory against the batch per rank: throughput flattens where "
             "the device is busy, and memory grows with the activations.",
    "precision": "Each precision against fp32 for the same model: on a GPU, tensor cores make "
                 "16-bit faster; on a CPU, bf16 is faster where its products run natively "
                 "(AVX-512 BF16; the record's metrics.arithmetic says whether they did), and "
                 "16-bit storage converted for every op (fp16, or bf16 without it) should be "
                 "slower: such a point faster than fp32 is worth checking for noise before it "
                 "is believed.",
    "algorithms": "Which convolution algorithm each layer runs fastest with, and what a "
                  "workspace limit costs each policy: a named algorithm fails where it cannot "
                  "fit, the heuristic and autotuning fall back to slower, smaller ones. The "
                  "profile of each point (profiles/) has every pass's algorithm and workspace.",
    "overlap": "What hiding all-reduce behind backward (or the next forward) buys: compare each "
               "strategy's step time with none at the same bucket size. The overlap table says "
               "how much communication was exposed and how much ran under compute.",
    "memory": "Each memory technique against the naive plan of the same model: how much of the "
              "step's peak it saves (the stacked bars show which categories), what it costs in "
              "throughput, and how much larger a batch then fits the budget (max batch, found by "
              "real steps under it). Parameters, gradients and optimizer state are the same in "
              "every technique: they bound what any plan can save.",
    "convergence": "Time to the target test accuracy, evaluation included, MLPerf style: a "
                   "faster step that needs more epochs can lose.",
}


def how_to_read(suite: str) -> str:
    return " ".join(t for t in (HOW_TO_READ.get(suite, ""), HOW_TO_READ_COMMON) if t)


def description(rs: ResultSet) -> str:
    """The suite's description from the sweep's summary.json, where it has one."""
    path = rs.directory / "summary.json"
    if not path.is_file():
        return ""
    try:
        data = read_json_file(path, "summary")
    except RecordError:
        return ""
    d = data.get("description") if isinstance(data, dict) else None
    return d if isinstance(d, str) else ""


RUN_AGAIN = ("A `dlbench run` command runs its point again as the suite ran it, with the "
             "launcher's placement and environment; a `dlbench simulate` command makes a "
             "simulated point again. `dlbench` is the binary that ran them, build/dlbench in a "
             "checkout (`scripts/dlbench --help` builds it once, before a command under mpirun).")


def commands(rs: ResultSet) -> list[tuple[str, str]]:
    """(point, command) for each record that carries the command that runs it again."""
    keys = varying_keys(rs.records)
    return [(f"{r.data['point']['index']} ({label(r, keys)})", r.data["command"])
            for r in rs.records
            if isinstance(r.data.get("command"), str) and r.data.get("point")]


def failures(rs: ResultSet) -> list[Record]:
    return [r for r in rs.records if not r.ok]


def markdown(rs: ResultSet, plots: list[Plot], header, rows, env, skipped=(),
             val: validation.Validation | None = None) -> str:
    counts: dict[str, int] = {}
    for r in rs.records:
        counts[r.data["status"]] = counts.get(r.data["status"], 0) + 1
    out = [f"# dlbench report: suite `{rs.suite}`", ""]
    out += validation.markdown_lines(rs, val)  # validate-sim's question comes first
    if headline.pieces(rs):
        out += [headline.markdown(headline.pieces(rs)), ""]
    if description(rs):
        out += [description(rs), ""]
    loud = sum(1 for r in rs.records if r.ok and common.noisy(r))
    out += [f"{len(rs.records)} points: " + ", ".join(f"{v} {k}" for k, v in counts.items()) +
            (f"; {loud} of the ok points measured on a noisy machine (see the noise column)"
             if loud else "") +
            f". Records: `{rs.directory / 'results.jsonl'}`.", "", "## How to read this", "",
            how_to_read(rs.suite), "", "## Summary", "",
           "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    # The first column carries each point's anchor (#point-N), which the first paragraph links.
    out += ["| " + " | ".join([f'<a id="point-{row[0]}"></a>{row[0]}', *row[1:]]) + " |"
            for row in rows]
    for p in peers(rs.records):
        out += ["", f"vs {p}: dlbench's images/s over {p}'s at the same point, both from this "
                f"run (reports/peers/{p}_train.py trains the same model with the same settings)."]
    out += ["", "[95%]: a 95% confidence interval from a bootstrap over the repetitions (at "
            f"least {intervals.MIN_REPETITIONS}) or else the timed steps (none below "
            f"{intervals.MIN_STEPS}); a ratio whose interval holds 1 (an efficiency whose "
            "interval holds 100%) is marked not distinguishable."]
    if loud_lines := noisy_lines(rs):
        out += ["", "Why the noisy points were noisy:", "", *[f"- {line}" for line in loud_lines]]
    bad = failures(rs)
    out += ["", "## Failures", ""]
    if not bad:
        out.append("None: every point ended ok.")
    keys = varying_keys(rs.records)
    for r in bad:
        out += [f"- point {r.data['point']['index']} ({label(r, keys)}): **{r.data['status']}**: "
                f"{r.data.get('message', '')}"]
        if r.data.get("stderr_tail"):
            out += ["", "  ```", *["  " + line for line in
                                   r.data["stderr_tail"].strip().splitlines()[-12:]], "  ```"]
    out += ["", "## Plots", ""]
    out += [f"- Skipped {s}" for s in skipped] + ([""] if skipped else [])
    for p in plots:
        png = [f for f in p.files if f.suffix == ".png"][0]
        out += [f"### {p.title}", "", f"![{p.title}]({png.relative_to(rs.directory)})", ""]
        if p.table:
            head, body = p.table
            out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            out += ["| " + " | ".join(row) + " |" for row in body] + [""]
        if p.note:
            out += [p.note, ""]
    if commands(rs):
        out += ["## Running a point again", "", RUN_AGAIN, ""]
        out += [f"- point {p}: `{c}`" for p, c in commands(rs)] + [""]
    out += ["## Environment", "", "| key | value |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in env.items()]
    return "\n".join(out) + "\n"


def plots_html(rs: ResultSet, plots: list[Plot], skipped) -> list[str]:
    """The report's plots: each a <figure> with its caption, then its table."""
    e = html.escape
    parts = []
    parts.append("<h2>Plots</h2>")
    parts += [f"<p>Skipped {e(s)}</p>" for s in skipped]
    for p in plots:
        svg = [f for f in p.files if f.suffix == ".svg"][0]
        parts.append(f"<h3>{e(p.title)}</h3><figure><img "
                     f"src='{e(str(svg.relative_to(rs.directory)))}' alt='{e(p.title)}'>"
                     f"<figcaption>{e(p.note)}</figcaption></figure>")
        if p.table:
            head, body = p.table
            parts.append("<div class='wide'><table><tr>" +
                         "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>")
            parts += ["<tr>" + "".join(f"<td>{e(v)}</td>" for v in row) + "</tr>" for row in body]
            parts.append("</table></div>")
    return parts


STYLE = "".join([
    "body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}",
    "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;"
    "padding:3px 6px;text-align:right}th{background:#f3f3f3}td.l{text-align:left}",
    # A row of the summary is one line (a wide table scrolls sideways, its point number staying
    # in view), not a column of words squeezed to fit the page.
    ".summary td{white-space:nowrap}.summary td:first-child,.summary th:first-child"
    "{position:sticky;left:0;background:#fff}.summary th:first-child{background:#f3f3f3}",
    "figure{margin:0.5em 0}figcaption{font-size:13px;color:#444;max-width:900px}",
    ".wide{overflow-x:auto;max-width:100%}",
    "img{max-width:100%;border:1px solid #eee;margin:0.5em 0}pre{background:#f6f8fa;"
    "padding:0.5em;overflow:auto;font-size:12px}"])


def html_page(rs: ResultSet, plots: list[Plot], header, rows, env, skipped=(),
              val: validation.Validation | None = None) -> str:
    e = html.escape
    status_color = {"ok": "#1a7f37", "oom": "#9a6700", "unsupported": "#57606a"}
    parts = ["<!doctype html><html><head><meta charset='utf-8'>",
             f"<title>dlbench report: {e(rs.suite)}</title><style>{STYLE}</style></head><body>",
             f"<h1>dlbench report: suite <code>{e(rs.suite)}</code></h1>",
             *validation.html_parts(rs, val),
             f"<p>{headline.html_text(headline.pieces(rs))}</p>" if headline.pieces(rs) else "",
             f"<p>{e(description(rs))}</p>" if description(rs) else "",
             f"<p>Records: <code>{e(str(rs.directory / 'results.jsonl'))}</code>" +
             (f"; {loud} of the ok points measured on a noisy machine (see the noise column)"
              if (loud := sum(1 for r in rs.records if r.ok and common.noisy(r))) else "") +
             "</p>",
             f"<h2>How to read this</h2><p>{e(how_to_read(rs.suite))}</p>",
             "<h2>Summary</h2><div class='wide'><table class='summary'><tr>" +
             "".join(f"<th>{e(h)}</th>" for h in header) + "</tr>"]
    status_col = header.index("status")
    for row in rows:
        cells = []
        for i, v in enumerate(row):
            style = ""
            if i == status_col:
                style = f" style='color:{status_color.get(v, '#cf222e')};font-weight:bold'"
            cells.append(f"<td{style}>{e(v)}</td>")
        parts.append(f"<tr id='point-{e(row[0])}'>" + "".join(cells) + "</tr>")
    parts.append("</table></div>")
    if loud_lines := noisy_lines(rs):
        parts.append("<p>Why the noisy points were noisy:</p><ul>" +
                     "".join(f"<li>{e(line)}</li>" for line in loud_lines) + "</ul>")
    parts.append("<h2>Failures</h2>")
    bad = failures(rs)
    if not bad:
        parts.append("<p>None: every point ended ok.</p>")
    keys = varying_keys(rs.records)
    for r in bad:
        parts.append(f"<p>point {r.data['point']['index']} ({e(label(r, keys))}): "
                     f"<b>{e(r.data['status'])}</b>: {e(r.data.get('message', ''))}</p>")
        if r.data.get("stderr_tail"):
            parts.append(f"<details><summary>stderr</summary><pre>{e(r.data['stderr_tail'])}"
                         "</pre></details>")
    parts += plots_html(rs, plots, skipped)
    if commands(rs):
        parts.append(f"<h2>Running a point again</h2><p>{e(RUN_AGAIN.replace('`', ''))}</p><ul>")
        parts += [f"<li>point {e(p)}: <code>{e(c)}</code></li>" for p, c in commands(rs)]
        parts.append("</ul>")
    parts.append("<h2>Environment</h2><div class='wide'><table>")
    parts += [f"<tr><th>{e(k)}</th><td class='l'>{e(str(v))}</td></tr>" for k, v in env.items()]
    parts.append("</table></div></body></html>")
    return "\n".join(parts) + "\n"


def build(directory: str | Path, peaks: list[dict] | None = None) -> Report:
    rs = load(directory)
    report_files = (rs.directory / "report.md", rs.directory / "report.html")
    for path in report_files:  # before any plot is drawn
        check_output(path, "report")
    check_directory(rs.directory / "plots", "plots", create=False)
    peaks = peaks_mod.load_peaks() if peaks is None else peaks
    skipped: list[str] = []
    plots = render_plots(rs, rs.directory / "plots", peaks, skipped)
    header, rows = summary_rows(rs, peaks)
    env = environment(rs)
    report = Report(rs.directory, plots, skipped)
    report.markdown, report.html = report_files
    val = validation.load(rs)  # validation.json, read once for both pages
    write_text_atomically(report.markdown, markdown(rs, plots, header, rows, env, skipped, val))
    write_text_atomically(report.html, html_page(rs, plots, header, rows, env, skipped, val))
    return report
