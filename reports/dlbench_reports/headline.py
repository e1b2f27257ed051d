"""The first paragraph of a report whose points train on JPEG files beside synthetic data, vary
in ranks, or else in batch: the suite's question answered in words, each figure linked to its row
of the summary table.

    On this machine (cpu: AMD EPYC 7B13, 2 hardware threads), resnet18 in fp32 at batch 8 per rank
    trains at 214.6 img/s on one rank. At 4 ranks the best strategy, overlap=backward, keeps 19.0%
    of linear scaling; 2 and 4 ranks share the machine's 2 hardware threads that one rank had
    alone, so that is contention for its cores, not scaling. Simulated on dgx-h100 with each
    rank's compute from the roofline of NVIDIA H100 80GB HBM3 (SXM5)
    (suites/devices/h100-sxm.json): resnet50 in bf16 at batch 64 per rank keeps 99.9% at 1,024
    GPUs with overlap=backward or overlap=forward (97.4% with overlap=none) (a model, not a
    measurement; every rank at one speed, so an upper bound).

(Where the best strategy's efficiency is within another's 95% interval, the sentence gives the
range of those it cannot be told from instead, and each clearly below: "At 4 ranks
overlap=backward and forward keep 11.4% to 11.5% of linear scaling, within each other's 95%
intervals (overlap=none: 5.0%)".)

Or, for a batch sweep:

    On this machine (cpu: AMD EPYC 7B13, 2 hardware threads), resnet18 in fp32 on 1 rank trains at
    40.1 img/s at batch 4 and 123.6 img/s at batch 32 (3.1x), its peak memory 140.0 MiB and
    183.4 MiB.

Or, for the input suite:

    On this machine (...), resnet18 in fp32 at batch 16 trains at 148.9 img/s on synthetic data,
    and on the JPEG files at 170.9 img/s with 1 loader thread(s) and 170.5 img/s with 2. The
    loader's own rate passes the step's from 1 thread(s) on: from there input does not bound
    training.

A paragraph is a list of pieces: plain text, or (text, point index) for a figure that links to
its row (`#point-N`, the anchor the summary table's first column carries)."""
from __future__ import annotations

import html

from . import intervals
from .plots import common, scaling
from .records import Record, ResultSet, efficiency, varying_keys

Piece = str | tuple[str, int]


def _index(r: Record) -> int:
    return r.data["point"]["index"]


def _setting(r: Record) -> str:
    c = r.config
    return f"{c.get('model')} in {c.get('precision')} at batch {c.get('batch')} per rank"


def _machine(r: Record) -> str:
    env = r.data.get("environment") or {}
    if env.get("device") == "cpu":
        return f"cpu: {env.get('cpu', '?')}, {env.get('cpu_threads', '?')} hardware threads"
    return str(env.get("device", "?"))


def _measured_at(records: list[Record], ranks: int) -> list[Record]:
    """The records at `ranks` that have a scaling efficiency to compare."""
    return [r for r in records if r.config.get("ranks") == ranks and efficiency(r) is not None
            and common.drawable(efficiency(r))]


def _best_at(records: list[Record], ranks: int) -> Record | None:
    """The record at `ranks` with the highest scaling efficiency (None: none has one)."""
    return max(_measured_at(records, ranks), key=efficiency, default=None)


def shares_cores(r: Record, one: Record) -> bool:
    """Whether several ranks of `r` share the cores its one-rank point `one` had to itself: fewer
    threads a rank than `one` had (the noise verdict's threads_per_rank), or more ranks than
    hardware threads."""
    if r.config.get("ranks", 1) < 2:
        return False
    if scaling.oversubscribed(r):
        return True
    n, n1 = r.get("noise.threads_per_rank"), one.get("noise.threads_per_rank")
    return isinstance(n, int) and isinstance(n1, int) and n < n1


def same_setting(records: list[Record], base: Record) -> list[Record]:
    """The records that differ from `base` only in ranks and overlap (scaling.GROUP_KEYS): one
    experiment, not a batch or model of another."""
    key = [base.config.get(k) for k in scaling.GROUP_KEYS]
    return [r for r in records if [r.config.get(k) for k in scaling.GROUP_KEYS] == key]


def _apart(a: Record, b: Record, records: list[Record]) -> bool:
    """Whether two points' efficiencies are told apart: both have a 95% interval and they do not
    meet. Without an interval (too few steps) nothing tells them apart."""
    ia, ib = intervals.efficiency_interval(a, records), intervals.efficiency_interval(b, records)
    if not (intervals.finite(ia) and intervals.finite(ib)):
        return False
    return ia[1] < ib[0] or ib[1] < ia[0]


def _strategies_at(records: list[Record], most: int, best: Record) -> list[Piece]:
    """What the strategies at `most` ranks keep of linear scaling: the best one where its interval
    stands apart from every other's; else the range of those it cannot be told from (no strategy
    is best on noise), then each one clearly below them."""
    at = _measured_at(records, most)
    best_text = (f"{common.number_text(100 * efficiency(best), '.1f')}%", _index(best))
    name = f"overlap={best.config.get('overlap')}"
    if len({r.config.get("overlap") for r in at}) < 2:
        return [f" At {most} ranks {name} keeps ", best_text, " of linear scaling"]
    tied = [r for r in at if r is best or not _apart(best, r, records)]
    below = [r for r in at if r not in tied]
    if len(tied) == 1:
        out: list[Piece] = [f" At {most} ranks the best strategy, {name}, keeps ", best_text,
                            " of linear scaling"]
    else:
        low = min(efficiency(r) for r in tied)
        kinds = [str(r.config.get("overlap")) for r in tied]
        names = "overlap=" + ", ".join(kinds[:-1]) + " and " + kinds[-1]
        why = ("within each other's 95% intervals" if intervals.finite(
            intervals.efficiency_interval(best, records)) else "too few steps to tell them apart")
        out = [f" At {most} ranks {names} keep {common.number_text(100 * low, '.1f')}% to ",
               best_text, f" of linear scaling, {why}"]
    for i, r in enumerate(below):
        out += [" (" if i == 0 else ", ", f"overlap={r.config.get('overlap')}: ",
                (f"{common.number_text(100 * efficiency(r), '.1f')}%", _index(r))]
    return out + ([")"] if below else [])


def measured_pieces(records: list[Record]) -> list[Piece]:
    """About the first configuration's points (from overlap=none's one-rank point, where there is
    one)."""
    one = [r for r in records if r.config.get("ranks") == 1]
    if not one:
        return []
    base = next((r for r in one if r.config.get("overlap") == "none"), one[0])
    records = same_setting(records, base)
    t = base.get("metrics.throughput_img_s")
    out: list[Piece] = [f"On this machine ({_machine(base)}), {_setting(base)} trains at ",
                        (f"{common.number_text(t, '.1f')} img/s", _index(base)),
                        " on one rank."]
    most = max(r.config["ranks"] for r in records)
    best = _best_at(records, most) if most > 1 else None
    if best is None:
        return out
    out += _strategies_at(records, most, best)
    shared = sorted({r.config["ranks"] for r in records if shares_cores(r, base)})
    if shared:
        cpus = scaling.shared_cpus([r for r in records if shares_cores(r, base)])
        out.append(f"; {' and '.join(map(str, shared))} ranks share {cpus} that one rank had "
                   "alone, so that is contention for its cores, not scaling.")
    else:
        out.append(".")
    return out


# What one simulated experiment's points share: a model at a batch under a sync mode (the
# strategies and bucket sizes are what it compares).
SETTING_KEYS = ("model", "precision", "batch", "image_size", "backend", "sync")
MAX_SETTINGS = 4  # named in the paragraph; the table has the rest


def _choice(r: Record, among: list[Record]) -> str:
    """'overlap=forward', and the bucket size where the points compare several."""
    buckets = len({x.config.get("bucket_mb") for x in among}) > 1
    return (f"overlap={r.config.get('overlap')}" +
            (f" and {common.number_text(r.config.get('bucket_mb'), 'g')} MB buckets"
             if buckets else ""))


def _ranks_word(r: Record) -> str:
    """'GPUs' for a simulation of GPUs, 'ranks' for one whose ranks compute on CPUs (this host's
    validate-sim, or a CPU's calibration on a GPU cluster's network)."""
    return "ranks" if r.config.get("backend") == "cpu" else "GPUs"


def _setting_pieces(at: list[Record]) -> list[Piece]:
    """'resnet50 in bf16 at batch 64 per rank keeps 99.9% at 1,024 GPUs with overlap=forward
    (91.6% with overlap=none)': the best choice at the most ranks (with every choice that keeps
    what it does to the 0.1 point shown: 'with overlap=backward or overlap=forward'), and the
    worst where the choices differ by 0.1 points or more."""
    most = max(r.config["ranks"] for r in at)
    best = _best_at(at, most)
    if best is None:
        return []
    sync = best.config.get("sync")
    tied = [r for r in _measured_at(at, most) if 100 * (efficiency(best) - efficiency(r)) < 0.05]
    choices = " or ".join(dict.fromkeys(_choice(r, at) for r in [best] + tied))
    out: list[Piece] = [f"{_setting(best)}" + (f" with --sync={sync}" if sync not in (None, "sync")
                                               else "") + " keeps ",
                        (f"{common.number_text(100 * efficiency(best), '.1f')}%", _index(best)),
                        f" at {most:,} {_ranks_word(best)} with {choices}"]
    worst = min(_measured_at(at, most), key=efficiency)
    if 100 * (efficiency(best) - efficiency(worst)) >= 0.1:
        out += [" (", (f"{common.number_text(100 * efficiency(worst), '.1f')}%", _index(worst)),
                f" with {_choice(worst, at)})"]
    return out


def simulated_pieces(records: list[Record]) -> list[Piece]:
    """A sentence per network: for each of its settings (MAX_SETTINGS at most), the best choice's
    efficiency at the most ranks, and the worst's where they differ."""
    out: list[Piece] = []
    for net in sorted({scaling.network(r) for r in records}):
        on = [r for r in records if scaling.network(r) == net]
        settings = list(dict.fromkeys(tuple(r.config.get(k) for k in SETTING_KEYS) for r in on))
        groups = [[r for r in on if tuple(r.config.get(k) for k in SETTING_KEYS) == s]
                  for s in settings[:MAX_SETTINGS]]
        parts = [(p, g[0]) for g in groups if (p := _setting_pieces(g))]
        if not parts:
            continue
        # Where the settings' compute came from: once, or each setting's where they differ.
        sources = {scaling.compute_source(r) for _, r in parts}
        one = len(sources) == 1
        out.append(f" Simulated on {net}" + (
            f" with each rank's compute from {next(iter(sources))}: " if one else ": "))
        for i, (p, r) in enumerate(parts):
            out += ([] if i == 0 else ["; "]) + p + (
                [] if one else [f" (compute from {scaling.compute_source(r)})"])
        more = len(settings) - MAX_SETTINGS
        out.append((f"; and {more} more settings in the table" if more > 0 else "") +
                   (" (a model, not a measurement" +
                    ("; every rank at one speed, so an upper bound)." if all(map(_one_speed, on))
                     else ").")))
    return out


def _one_speed(r: Record) -> bool:
    """A simulated point whose ranks all step at one speed: no jitter and no straggler, so no
    rank waits for a slower one (docs/simulation.md)."""
    return r.get("simulation.jitter") == "none" and not r.get("simulation.straggler")


def batch_pieces(records: list[Record]) -> list[Piece]:
    """About the first point's experiment (the points whose every other varying key is its own: a
    sweep over batch and a technique is one experiment per technique): its throughput and peak
    memory at the smallest and the largest batch ([] where they are one batch, or a throughput is
    missing)."""
    others = [k for k in varying_keys(records) if k != "batch"]
    same = [r for r in records
            if all(r.point_config.get(k) == records[0].point_config.get(k) for k in others)]
    small = min(same, key=lambda r: r.config.get("batch", 0))
    large = max(same, key=lambda r: r.config.get("batch", 0))
    t0, t1 = (r.get("metrics.throughput_img_s") for r in (small, large))
    if (small.config.get("batch") == large.config.get("batch") or
            not all(isinstance(t, (int, float)) and t > 0 for t in (t0, t1))):
        return []
    m0, m1 = (r.get("memory.peak_bytes_total") for r in (small, large))
    c = small.config
    ranks = c.get("ranks", 1)
    out: list[Piece] = [
        f"On this machine ({_machine(small)}), {c.get('model')} in {c.get('precision')} on "
        f"{ranks} rank{'s' if ranks != 1 else ''} trains at ",
        (f"{common.number_text(t0, '.1f')} img/s", _index(small)),
        f" at batch {c.get('batch')} and ",
        (f"{common.number_text(t1, '.1f')} img/s", _index(large)),
        f" at batch {large.config.get('batch')} ({common.number_text(t1 / t0, '.1f')}x)"]
    if isinstance(m0, int) and isinstance(m1, int):
        out += [", its peak memory ", (f"{m0 / common.MIB:.1f} MiB", _index(small)), " and ",
                (f"{m1 / common.MIB:.1f} MiB", _index(large))]
    return out + ["."]


def input_pieces(records: list[Record]) -> list[Piece]:
    """About the first model's input points (the input suite): its rate on synthetic data, on
    the JPEG files at the fewest and the most loader threads, and whether the loader's own rate
    passes the step's ([] without a synthetic point and a JPEG point with metrics.input)."""
    model = records[0].config.get("model")
    same = [r for r in records if r.config.get("model") == model]
    synthetic = [r for r in same if r.config.get("data", "synthetic") == "synthetic"]
    jpeg = sorted((r for r in same if r.get("metrics.input.threads")
                   and r.get("metrics.input.decode") != "gpu"),
                  key=lambda r: r.get("metrics.input.threads"))
    rates = [r.get("metrics.throughput_img_s") for r in synthetic[:1] + jpeg]
    if not synthetic or not jpeg or not all(isinstance(t, (int, float)) and t > 0 for t in rates):
        return []
    step, first, last = synthetic[0], jpeg[0], jpeg[-1]
    c = step.config
    out: list[Piece] = [
        f"On this machine ({_machine(step)}), {model} in {c.get('precision')} at batch "
        f"{c.get('batch')} trains at ",
        (f"{common.number_text(rates[0], '.1f')} img/s", _index(step)),
        " on synthetic data, and on the JPEG files at ",
        (f"{common.number_text(rates[1], '.1f')} img/s", _index(first)),
        f" with {first.get('metrics.input.threads')} loader thread(s)"]
    if last is not first:
        out += [" and ", (f"{common.number_text(rates[-1], '.1f')} img/s", _index(last)),
                f" with {last.get('metrics.input.threads')}"]
    passes = [r for r in jpeg
              if isinstance(r.get("metrics.input.loader_img_s"), (int, float))
              and r.get("metrics.input.loader_img_s") >= rates[0]]
    if passes:
        out += [f". The loader's own rate passes the step's from {passes[0].get('metrics.input.threads')}"
                " thread(s) on: from there input does not bound training."]
    else:
        out += [". The loader's own rate stays below the step's at every thread count tried: "
                "input bounds training."]
    return out + _gpu_decode_pieces(same)


def _gpu_decode_pieces(same: list[Record]) -> list[Piece]:
    """The model's fastest point with its images decoded on the GPU (--decode=gpu), if any."""
    gpu = [r for r in same if r.get("metrics.input.decode") == "gpu"
           and isinstance(r.get("metrics.throughput_img_s"), (int, float))]
    if not gpu:
        return []
    best = max(gpu, key=lambda r: r.get("metrics.throughput_img_s"))
    return [" Decoded on the GPU (", str(best.get("metrics.input.decoder")), "), it trains at ",
            (f"{common.number_text(best.get('metrics.throughput_img_s'), '.1f')} img/s",
             _index(best)),
            f" with {best.get('metrics.input.threads')} loader thread(s) reading the files."]


def pieces(rs: ResultSet) -> list[Piece]:
    """The paragraph: about the input pipeline where points train on JPEG files beside synthetic
    data (the input suite), about ranks where the points vary in ranks, else about the batch where
    they vary in batch, else []."""
    ok = [r for r in rs.records if r.ok and r.system == "dlbench" and r.data.get("point")]
    if any(r.get("metrics.input") for r in ok) and any(
            r.config.get("data", "synthetic") == "synthetic" for r in ok):
        return input_pieces(ok)
    if len({r.config.get("ranks") for r in ok}) < 2:
        if len({r.config.get("batch") for r in ok}) < 2:
            return []
        return batch_pieces(ok)
    measured = [r for r in ok if not scaling.simulated(r)]
    return measured_pieces(measured) + simulated_pieces([r for r in ok if scaling.simulated(r)])


def markdown(parts: list[Piece]) -> str:
    return "".join(p if isinstance(p, str) else f"[{p[0]}](#point-{p[1]})" for p in parts).strip()


def html_text(parts: list[Piece]) -> str:
    e = html.escape
    return "".join(e(p) if isinstance(p, str) else f"<a href='#point-{p[1]}'>{e(p[0])}</a>"
                   for p in parts).strip()
