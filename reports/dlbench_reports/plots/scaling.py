"""Throughput against ranks, one line per overlap strategy, with the ideal linear line and the
scaling efficiency (%) on a second axis, and each point's 95% interval as a bar. Measured points
and simulated ones are separate figures (a figure per network preset for the simulated, its
title naming where their compute came from); simulated points are hollow. A peer's points
(config.system, e.g. PyTorch DDP) are lines of their own, dash-dotted. At most six legend
entries: a line per strategy and the ideal; what else a figure needs is its caption."""
from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

from .. import intervals
from ..records import Record, efficiency, one_rank_throughput
from . import common

GROUP_KEYS = ("model", "precision", "batch", "image_size", "backend", "bucket_mb", "sync")


def sync_mode(record: Record) -> str:
    """The record's --sync ("sync" where it does not say: a record from before the key)."""
    return str(record.config.get("sync") or "sync")


def network(record: Record) -> str | None:
    """The network preset a simulated record ran on, with its ranks' speeds where they are not
    the calibration's measured jitter alone (None for a measured record)."""
    if not simulated(record):
        return None
    name = str(record.get("simulation.network.name"))
    extra = [f"jitter {record.get('simulation.jitter')}"] if record.get(
        "simulation.jitter") not in (None, "measured") else []
    if record.get("simulation.straggler"):
        extra.append(f"straggler {record.get('simulation.straggler')}")
    if record.get("simulation.compute_factor", 1) != 1:
        extra.append(f"compute x{record.get('simulation.compute_factor'):g}")
    return name + (f" ({', '.join(extra)})" if extra else "")


def simulated(record: Record) -> bool:
    return record.data.get("mode") == "simulated"


def groups(records: list[Record]) -> dict[tuple, list[Record]]:
    """Records that differ only in ranks and overlap, keyed by the rest of what matters: the
    measured points of a configuration on a plot, and its simulated ones on a plot per network
    preset, apart (a simulation of another machine is not a measurement of this one); a
    simulation of this host (of_this_host) beside the measured points."""
    out: dict[tuple, list[Record]] = defaultdict(list)
    for r in records:
        apart = simulated(r) and not of_this_host(r)
        key = tuple(sync_mode(r) if k == "sync" else r.config.get(k) for k in GROUP_KEYS)
        out[key + (network(r) if apart else None,)].append(r)
    return dict(out)


def of_this_host(record: Record) -> bool:
    """A simulation of the machine the measured points ran on: its network is this host's
    measured all-reduce (validate-sim's, from `bench allreduce`), so it is drawn beside them,
    hollow, as the model of the same experiment."""
    return simulated(record) and bool(record.get("simulation.network.measured"))


def device_file(record: Record) -> str | None:
    """'suites/devices/h100-sxm.json' for a simulated record calibrated by a device's roofline;
    None for one calibrated from a measurement."""
    file = record.get("simulation.calibration_source.device_file")
    if record.get("simulation.calibration_source.method") != "roofline" or not file:
        return None
    return f"suites/devices/{Path(str(file)).name}"


def compute_source(record: Record) -> str:
    """Where a simulated record's compute came from: 'the roofline of NVIDIA H100 ...
    (suites/devices/h100-sxm.json)', or 'measured on cpu: ...' (its calibration's method)."""
    device = record.get("simulation.device") or "?"
    if record.get("simulation.calibration_source.method") == "roofline":
        where = f" ({device_file(record)})" if device_file(record) else ""
        return f"the roofline of {device}{where}"
    return f"measured on {device}"


# How a peer's strategies are named in the legend (reports/peers/pytorch_train.py).
PEER_NAMES = {("pytorch", "none"): "PyTorch, all-reduce after backward",
              ("pytorch", "backward"): "PyTorch DDP (overlaps backward)"}


def series_name(record: Record) -> str:
    """"none" for dlbench's overlap=none; "none, simulated" for its simulation; "PyTorch DDP
    (overlaps backward)" for a peer's."""
    strategy = record.config.get("overlap", "none")
    if simulated(record):
        return f"{strategy}, simulated"
    if record.system == "dlbench":
        return strategy
    return PEER_NAMES.get((record.system, strategy), f"{record.system}, overlap={strategy}")


def series(records: list[Record]) -> dict[str, dict]:
    """Per strategy (and system): ranks, throughput, efficiency and measured/simulated, from ok
    records. Efficiency as records.efficiency defines it (against the same strategy's and
    system's 1-rank point). dlbench's strategies come first."""
    by_strategy: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if r.ok:
            by_strategy[series_name(r)].append(r)

    def order(kv):
        r = kv[1][0]
        return (r.system != "dlbench", r.system,
                common.strategy_order(r.config.get("overlap", "none")))

    out = {}
    for strategy, rs in sorted(by_strategy.items(), key=order):
        rs.sort(key=lambda r: r.config["ranks"])
        out[strategy] = {
            "ranks": [r.config["ranks"] for r in rs],
            "throughput": [r.need("metrics.throughput_img_s") for r in rs],
            "efficiency": [efficiency(r) for r in rs],
            "simulated": [simulated(r) for r in rs],
            "oversubscribed": [oversubscribed(r) for r in rs],
            "interval": [intervals.throughput_interval(r) for r in rs],
            "base": simulated_base(rs[0]) if simulated(rs[0]) else one_rank_throughput(rs[0], records),
            "peer": rs[0].system != "dlbench",
            "records": rs,
        }
    return out


def simulated_base(record: Record) -> float | None:
    """A simulated point's one-rank throughput: its batch over the simulated one-rank step that
    its efficiency is against (metrics.scaling_loss.one_rank_step_s)."""
    step = record.get("metrics.scaling_loss.one_rank_step_s")
    return record.config["batch"] / step if step else None


def oversubscribed(record: Record) -> bool:
    """Ranks sharing a CPU's hardware threads: the record's noise verdict says so where it has one
    (ranks x threads per rank against the CPUs the ranks were given); older records, more ranks
    than the machine has threads (each rank runs at least one). Such a point measures
    contention, not scaling. A simulated point gives each rank a device of its own."""
    if simulated(record):
        return False
    noise = record.get("noise")
    if isinstance(noise, dict) and isinstance(noise.get("oversubscribed"), bool):
        return noise["oversubscribed"]  # as the ranks measured their CPUs
    env = record.data.get("environment") or {}
    try:
        threads = int(env.get("cpu_threads", 0))
    except (TypeError, ValueError):
        return False
    return env.get("device") == "cpu" and threads > 0 and record.config["ranks"] > threads


def shared_cpus(records: list[Record]) -> str:
    """What ranks sharing cores share: the CPUs a multi-rank run's ranks had between them (its
    noise's usable_cpus, the union of their CPU masks, which taskset or a cpuset narrows) where
    a record says, else the machine's hardware threads (older records)."""
    for r in records:
        n = r.get("noise.usable_cpus")
        if r.config.get("ranks", 1) > 1 and isinstance(n, int) and not isinstance(n, bool):
            return f"the {n} CPU" + ("" if n == 1 else "s")
    threads = (records[0].data.get("environment") or {}).get("cpu_threads", "?") if records else "?"
    return f"the machine's {threads} hardware threads"


def shared_cores_note(records: list[Record]) -> str:
    """What a plot of ranks on one CPU must say: which points share cores, and what the ideal
    line and the efficiency then assume."""
    shared = sorted({r.config["ranks"] for r in records if r.ok and oversubscribed(r)})
    if not shared:
        return ""
    return (f"Ranks {'/'.join(map(str, shared))} share {shared_cpus(records)} "
            "(oversubscribed; marked x): they measure contention for the same cores, not "
            "scaling. The ideal line and the efficiency assume a device (or core set) per rank.")


def checked(s: dict, undrawn: common.Undrawn, log: bool) -> dict:
    """The series as the plot draws it: each value through undrawn (NaN where it cannot be
    drawn, and named), an interval only where both ends can be, efficiency in %."""
    out = dict(s)
    rs = s["records"]
    out["ranks"] = [undrawn.of(r, n, "ranks", log) for r, n in zip(rs, s["ranks"])]
    out["throughput"] = [undrawn.of(r, t, "throughput", log) for r, t in zip(rs, s["throughput"])]
    out["interval"] = [iv if iv and all(common.drawable(v, log) for v in iv) else None
                       for iv in s["interval"]]
    out["efficiency"] = [undrawn.of(r, 100 * e, "efficiency (%)") if e is not None else math.nan
                         for r, e in zip(rs, s["efficiency"])]
    return out


def draw_series(ax, eff_ax, strategy: str, s: dict, color: str) -> None:
    """One strategy's throughput line, its points (hollow where simulated), intervals,
    oversubscribed marks and efficiency."""
    sim_series = all(s["simulated"])
    ax.plot(s["ranks"], s["throughput"], "-." if s["peer"] else ":" if sim_series else "-",
            color=color, label=strategy if s["peer"] else f"overlap={strategy}",
            gid=f"throughput:{strategy}")
    for n, t, sim, shared in zip(s["ranks"], s["throughput"], s["simulated"],
                                 s["oversubscribed"]):
        if math.isnan(n) or math.isnan(t):
            continue
        ax.plot([n], [t], "o", color=color, markerfacecolor="none" if sim else color,
                markersize=7)
        if sim and not sim_series:
            ax.annotate("simulated", (n, t), textcoords="offset points", xytext=(4, 4),
                        fontsize=7, color=color)
        if shared:
            ax.plot([n], [t], "x", color="black", markersize=9,
                    gid=f"oversubscribed:{common.tick_text(n)}")
    bars = [(n, iv) for n, iv in zip(s["ranks"], s["interval"]) if iv and not math.isnan(n)]
    if bars:  # the 95% interval of each point's throughput (intervals.py)
        ax.vlines([n for n, _ in bars], [iv[0] for _, iv in bars], [iv[1] for _, iv in bars],
                  color=color, linewidth=2, alpha=0.6, gid=f"interval:{strategy}")
    if s["base"]:
        eff_ax.plot(s["ranks"], s["efficiency"], ":", color=color, marker="s", markersize=3,
                    gid=f"efficiency:{strategy}", label="_nolegend_")  # its strategy's colour


def draw_ideal(ax, data: dict, ranks: list, undrawn: common.Undrawn, log: bool) -> None:
    """Linear from the 1-rank throughput (overlap=none's where it has one)."""
    bases = [s["base"] for s in data.values() if s["base"] and not s["peer"]]
    if not bases:
        return
    base = bases[0] if "none" not in data or not data["none"]["base"] else data["none"]["base"]
    ideal = [undrawn.keep(n * base, f"ideal throughput at {common.tick_text(n)} ranks", log)
             for n in ranks]
    ax.plot(ranks, ideal, "--", color="#888888", label="ideal (linear from 1 rank)", gid="ideal")


def render(records: list[Record]):
    if len({r.config["ranks"] for r in records}) < 2:
        return None
    data = series(records)
    if not data:
        return None
    fig, ax = common.figure()
    eff_ax = ax.twinx()
    # To 1,024 ranks and beyond: doublings evenly spaced, throughput on a log axis too.
    log = max(n for s in data.values() for n in s["ranks"]) > 16
    undrawn = common.Undrawn()
    data = {k: checked(s, undrawn, log) for k, s in data.items()}
    for i, (strategy, s) in enumerate(data.items()):
        draw_series(ax, eff_ax, strategy, s, f"C{i}")
    all_ranks = sorted({n for s in data.values() for n in s["ranks"] if not math.isnan(n)})
    draw_ideal(ax, data, all_ranks, undrawn, log)
    ax.set_xlabel("GPUs (simulated ranks, a device each)" if all(
        sim for s in data.values() for sim in s["simulated"]) else
        "ranks (processes: one GPU each, or sharing the cores of one CPU)")
    ax.set_ylabel("throughput (images/s, all ranks)")
    eff_ax.set_ylabel("scaling efficiency (%): dotted, squares, in each strategy's colour")
    eff_ax.set_ylim(0, 110)
    if log:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.set_xticks(all_ranks)
    ax.set_xticklabels([common.tick_text(n) for n in all_ranks], fontsize=7)
    ax.grid(alpha=0.3)
    ax.set_title(title(records, data), fontsize=10)
    lines, labels = ax.get_legend_handles_labels()
    lines2, labels2 = eff_ax.get_legend_handles_labels()
    ax.legend(lines + lines2, labels + labels2, fontsize=7, loc="upper center",
              bbox_to_anchor=(0.5, -0.13), ncol=3, frameon=False)
    common.footnote(fig, "", undrawn)  # values no axis can place; the caption says the rest
    return fig


def caption(records: list[Record]) -> str:
    """What the report says under the plot: which points share cores, which failed or were
    noisy, what a simulated plot's compute came from, and what the ideal line assumes."""
    sim = [r for r in records if simulated(r)]
    parts = [shared_cores_note(records)]
    if sim and len(sim) < len(records):
        parts.append("Hollow points: simulated from the one-rank points on this host's measured "
                     "all-reduce (dlbench validate-sim), beside what was measured.")
    elif sim:
        parts.append(f"Simulated on {network(sim[0])}, each rank's compute from "
                     f"{compute_source(sim[0])}: a model of that machine, not a measurement "
                     "(docs/simulation.md).")
    parts += ["The ideal line is linear from the one-rank point (overlap=none's where there is "
              "one), with a device per rank; efficiency is against the same strategy's one-rank "
              "point.", common.status_note(records)]
    return common.shorten(" ".join(p for p in parts if p), common.MAX_NOTE_CHARS)


def title(records: list[Record], data: dict) -> str:
    batch = sorted({r.config["batch"] for r in records})
    sim = [r for r in records if simulated(r)]
    if sim and len(sim) < len(records):  # a simulation of this host beside its measurement
        head = "Measured weak scaling (hollow: simulated on this host's measured network)"
        sim = []
    else:
        head = f"Simulated on {network(sim[0])}" if sim else "Measured weak scaling"
    compute = ""
    if sim:
        compute = (f"; compute: roofline, {device_file(sim[0])}" if device_file(sim[0])
                   else f"; compute: {compute_source(sim[0])}")
    sync = sync_mode(records[0])
    return (f"{head}: {common.describe(records)}\n"
            f"batch {'/'.join(map(str, batch))} per rank, "
            f"{records[0].config.get('image_size')}px"
            f"{'' if sync == 'sync' else f', --sync={sync}'}{compute}")
