"""Each plot renders from committed records, and what it draws equals what the records say."""
from __future__ import annotations

import copy
import itertools
import math

import pytest
from dlbench_reports.plots import (batch, common, convergence, global_batch, memory, overlap,
                                   precision, scaling, scaling_loss, sync_modes, timeline)
from dlbench_reports import headline, intervals
from dlbench_reports.records import efficiency, load


def lines_by_gid(fig):
    return {l.get_gid(): l for ax in fig.axes for l in ax.get_lines() if l.get_gid()}


def bars_by_gid(fig, prefix):
    out = {}
    for ax in fig.axes:
        for c in ax.containers:
            for p in c.patches:
                if p.get_gid() and p.get_gid().startswith(prefix):
                    out.setdefault(p.get_gid(), []).append(p)
    return out


def test_scaling_plot_draws_the_records(results, tmp_path):
    rs = load(results("scaling"))
    fig = scaling.render(rs.records)
    lines = lines_by_gid(fig)
    by = {}
    for r in rs.ok:
        by.setdefault(r.config["overlap"], []).append(r)
    assert set(by) == {"none", "backward", "forward"}
    for strategy, rs_ in by.items():
        rs_.sort(key=lambda r: r.config["ranks"])
        line = lines[f"throughput:{strategy}"]
        assert list(line.get_xdata()) == [r.config["ranks"] for r in rs_]
        assert list(line.get_ydata()) == pytest.approx(
            [r.data["metrics"]["throughput_img_s"] for r in rs_])
        base = rs_[0].data["metrics"]["throughput_img_s"]
        assert list(lines[f"efficiency:{strategy}"].get_ydata()) == pytest.approx(
            [100 * r.data["metrics"]["throughput_img_s"] / (r.config["ranks"] * base) for r in rs_])
    ideal = lines["ideal"]
    t1 = by["none"][0].data["metrics"]["throughput_img_s"]
    assert list(ideal.get_ydata()) == pytest.approx([n * t1 for n in ideal.get_xdata()])
    title = fig.axes[0].get_title()
    assert "resnet18" in title and "fp32" in title and "Xeon" in title
    assert "images/s" in fig.axes[0].get_ylabel() and "%" in fig.axes[1].get_ylabel()
    files = common.save(fig, tmp_path, "scaling")
    assert [f.suffix for f in files] == [".png", ".svg"] and all(f.stat().st_size > 0 for f in files)


def test_scaling_plot_says_which_ranks_share_cores_and_claims_no_simulation(results):
    # The fixture ran 1, 2 and 4 ranks on a CPU with 2 hardware threads: 4 ranks share them.
    rs = load(results("scaling"))
    fig = scaling.render(rs.records)
    marks = [g for g in lines_by_gid(fig) if g.startswith("oversubscribed:")]
    assert marks == ["oversubscribed:4"]
    assert len([l for l in fig.axes[0].get_lines() if l.get_gid() == "oversubscribed:4"]) == 3
    # What the plot needs said is its caption, under it in the report, not text in the image.
    assert "Ranks 4 share the machine's 2 hardware threads" in scaling.caption(rs.records)
    assert not fig.texts
    assert fig.axes[0].get_title().startswith("Measured weak scaling")  # no simulated point
    assert "2 hardware threads" in fig.axes[0].get_title()


def test_the_caption_names_the_cpus_the_ranks_were_given_where_records_say(results):
    # Records that measured their ranks' CPUs (noise.usable_cpus): under taskset -c 0, one CPU
    # for all of them, whatever the machine has.
    rs = load(results("scaling"))
    for r in rs.records:
        if r.config["ranks"] > 1:
            r.data.setdefault("noise", {})["usable_cpus"] = 1
    assert "Ranks 4 share the 1 CPU (oversubscribed" in scaling.caption(rs.records)
    assert "the 1 CPU that one rank had alone" in "".join(
        p if isinstance(p, str) else p[0] for p in headline.measured_pieces(rs.records))


def test_the_headline_names_a_best_strategy_only_where_its_interval_stands_apart(results,
                                                                                   monkeypatch):
    rs = load(results("scaling"))
    most = max(r.config["ranks"] for r in rs.records if r.ok)
    at = [r for r in rs.records if r.ok and r.config["ranks"] == most and efficiency(r)]
    assert len({r.config["overlap"] for r in at}) > 1
    best = max(at, key=efficiency)

    def first(width):
        monkeypatch.setattr(intervals, "efficiency_interval", lambda r, _: None if width is None
                            else (100 * efficiency(r) - width(r), 100 * efficiency(r) + width(r)))
        return "".join(p if isinstance(p, str) else p[0]
                       for p in headline.measured_pieces(rs.records))

    def names(rs_):
        kinds = [r.config["overlap"] for r in rs_]
        return "overlap=" + ", ".join(kinds[:-1]) + " and " + kinds[-1]

    narrow = first(lambda r: 1e-9)
    assert f"the best strategy, overlap={best.config['overlap']}, keeps" in narrow
    others = sorted((r for r in at if r is not best), key=lambda r: at.index(r))
    assert ("of linear scaling (" + ", ".join(
        f"overlap={r.config['overlap']}: {100 * efficiency(r):.1f}%" for r in others) + ")"
        ) in narrow  # the others in one parenthesis
    wide = first(lambda r: 100.0)  # every interval meets every other
    low = min(efficiency(r) for r in at)
    assert (f"{names(at)} keep {100 * low:.1f}% to {100 * efficiency(best):.1f}% "
            "of linear scaling, within each other's 95% intervals") in wide
    assert "best strategy" not in wide
    # The worst stands apart, the others meet the best: the range is theirs, the worst named.
    worst = min(at, key=efficiency)
    eb, ew = efficiency(best), efficiency(worst)
    mixed = first(lambda r: 1e-9 if r is worst else 90 * (eb - ew) if r is best
                  else 100 * (eb - efficiency(r)) + 1e-6)
    rest = [r for r in at if r is not worst]
    assert (f"{names(rest)} keep {100 * min(map(efficiency, rest)):.1f}% to "
            f"{100 * efficiency(best):.1f}% of linear scaling, within each other's 95% "
            f"intervals (overlap={worst.config['overlap']}: {100 * efficiency(worst):.1f}%)") in mixed
    # No interval at all (too few steps): no best either.
    bare = first(None)
    assert "best strategy" not in bare and "too few steps to tell them apart" in bare


def test_scaling_plots_have_at_most_six_legend_entries(results):
    """13 entries (a line and an efficiency line per strategy and system, the ideal...) made the
    legend larger than the plot; efficiency lines take their strategy's colour instead."""
    for name in ("scaling", "peers"):
        rs = load(results(name))
        for group in scaling.groups(rs.records).values():
            fig = scaling.render(group)
            if fig is None:
                continue
            legend = fig.axes[0].get_legend()
            assert legend is not None and 1 <= len(legend.get_texts()) <= 6, name


def test_scaling_plot_draws_each_points_interval(results):
    from dlbench_reports import intervals
    rs = load(results("scaling"))  # 10 timed steps a point: enough for an interval
    fig = scaling.render(rs.records)
    drawn = {c.get_gid(): c for c in fig.axes[0].collections if c.get_gid()}
    for strategy in ("none", "backward", "forward"):
        ok = sorted((r for r in rs.ok if r.config["overlap"] == strategy),
                    key=lambda r: r.config["ranks"])
        segments = drawn[f"interval:{strategy}"].get_segments()
        assert len(segments) == len(ok)
        for seg, r in zip(segments, ok):
            lo, hi = intervals.throughput_interval(r)
            assert seg[0][0] == r.config["ranks"]
            assert (seg[0][1], seg[1][1]) == pytest.approx((lo, hi))


def simulate(record, network="dgx-h100", one_rank_step_s=0.1):
    """`record` as `dlbench simulate` writes one: mode simulated, its network and breakdown."""
    record.data["mode"] = "simulated"
    record.data["simulation"] = {"network": {"name": network}}
    step = 1 / record.data["metrics"]["throughput_img_s"] * record.config["batch"] * \
        record.config["ranks"]
    record.data["metrics"]["scaling_loss"] = {
        "one_rank_step_s": one_rank_step_s, "step_s": step, "exposed_comm_s": 0.25 * step,
        "waiting_for_slowest_s": 0.5 * step, "compute_slowdown_s": 0.0,
        "rest_s": 0.25 * step - one_rank_step_s}
    return record


def test_scaling_plot_draws_simulated_points_hollow_in_a_figure_of_their_own(results):
    rs = load(results("scaling"))
    sim = [simulate(copy.deepcopy(r)) for r in rs.ok if r.config["overlap"] == "none"]
    fig = scaling.render(sim)
    markers = [l for l in fig.axes[0].get_lines() if l.get_marker() == "o"]
    assert len(markers) == len(sim) and all(l.get_markerfacecolor() == "none" for l in markers)
    assert fig.axes[0].get_title().startswith("Simulated on dgx-h100")
    assert "overlap=none, simulated" in [l.get_label() for l in fig.axes[0].get_lines()]
    assert "Simulated on dgx-h100" in scaling.caption(sim)
    assert "not a measurement" in scaling.caption(sim)


def test_scaling_groups_put_measured_points_and_each_network_on_plots_of_their_own(results):
    """Measured points and a simulation of another machine on the same axes read as one
    experiment: the efficiency fell to 16% at 4 ranks and rose again to 96% at 8."""
    rs = load(results("scaling"))
    measured = [r for r in rs.records if r.ok]
    a, b = copy.deepcopy(rs.records[-1]), copy.deepcopy(rs.records[-2])
    simulate(a, "dgx-h100")
    simulate(b, "pcie-25gbe")
    groups = list(scaling.groups(rs.records + [a, b]).values())
    assert len(groups) == 3
    assert [g for g in groups if all(m in g for m in measured)] == [rs.records]
    assert sorted(len(g) for g in groups if any(scaling.simulated(r) for r in g)) == [1, 1]
    assert all(all(scaling.simulated(r) for r in g) for g in groups if a in g or b in g)


def test_scaling_groups_keep_each_sync_mode_on_a_plot_of_its_own(results):
    """Independent ranks (or stale, or async) beside synchronous ones on one line would read as
    one experiment; a record without the key is synchronous."""
    rs = load(results("scaling"))
    independent = copy.deepcopy(rs.records[-1])
    independent.data["config"]["sync"] = "independent"
    old = copy.deepcopy(rs.records[-2])
    old.data["config"].pop("sync", None)
    groups = list(scaling.groups(rs.records + [independent, old]).values())
    assert len(groups) == 2
    assert [g for g in groups if independent in g] == [[independent]]
    assert old in [g for g in groups if independent not in g][0]
    assert "--sync=independent" in scaling.title([independent], {})
    assert "--sync" not in scaling.title([old], {})


def test_a_simulation_of_this_host_is_drawn_beside_its_measured_points(results):
    """validate-sim simulates the measured points on this host's measured all-reduce: the same
    experiment, so the same figure, hollow (a lone 2-rank simulated point had no figure at all)."""
    rs = load(results("scaling"))
    sim = simulate(copy.deepcopy(rs.records[-1]), "this-host")
    sim.data["simulation"]["network"]["measured"] = [{"ranks": 2, "points": []}]
    groups = list(scaling.groups(rs.records + [sim]).values())
    assert len(groups) == 1 and sim in groups[0]
    fig = scaling.render(groups[0])
    assert "hollow: simulated on this host's measured network" in fig.axes[0].get_title()
    assert "Hollow points" in scaling.caption(groups[0])


def test_scaling_loss_plot_stacks_the_recorded_parts(results):
    rs = load(results("scaling"))
    recs = [simulate(copy.deepcopy(r)) for r in rs.ok]
    groups = list(scaling_loss.groups(recs).values())
    assert len(groups) == 1
    fig = scaling_loss.render(groups[0])
    strategies = sorted({r.config["overlap"] for r in recs}, key=common.strategy_order)
    assert [ax.get_title() for ax in fig.axes] == [f"overlap={s}" for s in strategies]
    for ax, strategy in zip(fig.axes, strategies):
        rs_s = sorted((r for r in recs if r.config["overlap"] == strategy),
                      key=lambda r: r.config["ranks"])
        bars = {}
        for patch in ax.patches:
            bars.setdefault(patch.get_gid(), []).append(patch)
        for key, _ in scaling_loss.PARTS:
            heights = [p.get_height() for p in bars[f"loss:{strategy}:{key}"]]
            assert heights == pytest.approx(
                [1e3 * r.data["metrics"]["scaling_loss"][key] for r in rs_s])
        # Every stack below the top of the axes (they share it), with room: none cut off.
        tops = [p.get_y() + p.get_height() for p in ax.patches]
        assert max(tops) < 0.95 * ax.get_ylim()[1]
    # Measured records carry no breakdown yet: nothing to plot.
    assert scaling_loss.groups(rs.records) == {}


def test_measured_and_simulated_scaling_loss_have_titles_of_their_own(results, tmp_path):
    from dlbench_reports.records import ResultSet
    from dlbench_reports.report import render_plots
    rs = load(results("scaling"))
    measured = [copy.deepcopy(r) for r in rs.ok]
    for r in measured:  # a measured breakdown, as newer records carry
        r.data["metrics"]["scaling_loss"] = dict(
            simulate(copy.deepcopy(r)).data["metrics"]["scaling_loss"])
    sim = [simulate(copy.deepcopy(r)) for r in rs.ok]
    plots = render_plots(ResultSet(rs.directory, measured + sim), tmp_path, [])
    titles = [p.title for p in plots if p.name.startswith("scaling-loss")]
    assert titles == ["Scaling loss, measured", "Scaling loss, simulated on dgx-h100"]
    # Two groups of one kind (two batches) are numbered, not named alike.
    assert scaling_loss.title(sim, titles) == "Scaling loss, simulated on dgx-h100 (2)"
    assert scaling_loss.title(sim, titles + ["Scaling loss, simulated on dgx-h100 (2)"]) == (
        "Scaling loss, simulated on dgx-h100 (3)")


def test_batch_plot_draws_throughput_and_peak_memory(results):
    rs = load(results("batch"))
    fig = batch.render(rs.records)
    lines = lines_by_gid(fig)
    ok = sorted(rs.ok, key=lambda r: r.config["batch"])
    assert list(lines["throughput"].get_xdata()) == [r.config["batch"] for r in ok]
    assert list(lines["throughput"].get_ydata()) == pytest.approx(
        [r.data["metrics"]["throughput_img_s"] for r in ok])
    assert list(lines["peak_memory"].get_ydata()) == pytest.approx(
        [r.data["memory"]["peak_bytes_total"] / 2**20 for r in ok])
    assert "MiB" in fig.axes[1].get_ylabel()


def with_repetitions(d, spread=0.1):
    """The directory's ok records given 5 repetitions around their throughput (+-spread), so
    that each has an interval however few steps it timed."""
    import json
    lines = [json.loads(l) for l in (d / "results.jsonl").read_text().splitlines()]
    for r in lines:
        if r["status"] == "ok":
            t = r["metrics"]["throughput_img_s"]
            x = [t * (1 + spread * k) for k in (-1, -0.5, 0, 0.5, 1)]
            sd = (sum((v - t) ** 2 for v in x) / 4) ** 0.5
            r["metrics"]["repetitions"] = {"count": 5, "throughput_img_s": x, "median": t,
                                           "mean": t, "stddev": sd, "cv": sd / t}
    (d / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return load(d)


def test_batch_and_precision_plots_draw_each_points_interval(results):
    from dlbench_reports import intervals
    rs = with_repetitions(results("batch"))
    fig = batch.render(rs.records)
    drawn = {c.get_gid(): c for c in fig.axes[0].collections if c.get_gid()}
    ok = sorted((r for r in rs.ok if r.system == "dlbench"), key=lambda r: r.config["batch"])
    segments = drawn["interval:dlbench"].get_segments()
    assert len(segments) == len(ok)
    for seg, r in zip(segments, ok):
        assert seg[0][0] == r.config["batch"]
        assert (seg[0][1], seg[1][1]) == pytest.approx(intervals.throughput_interval(r))
    rs = with_repetitions(results("precision"))
    fig = precision.render(rs.records, [])
    drawn = {c.get_gid(): c for c in fig.axes[0].collections if c.get_gid()}
    bars = bars_by_gid(fig, "precision:")
    models = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    want = {(r.config["model"], r.config["precision"]): r for r in rs.ok}
    for p in ("fp32", "fp16", "bf16"):
        segments = drawn[f"interval:{p}"].get_segments()
        assert len(segments) == len(models)
        for seg, bar, m in zip(segments, bars[f"precision:{p}"], models):
            assert seg[0][0] == pytest.approx(bar.get_x() + bar.get_width() / 2)
            assert (seg[0][1], seg[1][1]) == pytest.approx(
                intervals.throughput_interval(want[(m, p)]))


def test_precision_plot_gives_cuda_graph_points_bars_of_their_own(results):
    """A suite that sweeps cuda_graph: each precision with and without it, never one over the other."""
    import json
    d = results("precision")
    lines = (d / "results.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert first["status"] == "ok"
    graph = json.loads(lines[0])
    graph["config"]["cuda_graph"] = True
    graph["metrics"]["throughput_img_s"] = first["metrics"]["throughput_img_s"] * 1.5
    graph["point"]["id"] = graph["point"]["id"] + "-graph"
    (d / "results.jsonl").write_text("\n".join(lines + [json.dumps(graph)]) + "\n")
    rs = load(d)
    fig = precision.render(rs.records, [])
    bars = bars_by_gid(fig, "precision:")
    p = first["config"]["precision"]
    assert f"precision:{p} graph" in bars and f"precision:{p}" in bars
    models = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    at = models.index(first["config"]["model"])
    assert bars[f"precision:{p} graph"][at].get_height() == pytest.approx(
        graph["metrics"]["throughput_img_s"])
    assert bars[f"precision:{p}"][at].get_height() == pytest.approx(
        first["metrics"]["throughput_img_s"])


def test_precision_plot_bars_mfu_labels_and_memory(results):
    rs = load(results("precision"))
    cpu = rs.ok[0].data["environment"]["device"]
    peaks = [{"name": "test CPU", "match": f"^{cpu}$", "peak_flops": {"fp32": 2.0e11},
              "source": "a peak made up for this test"}]
    fig = precision.render(rs.records, peaks)
    bars = bars_by_gid(fig, "precision:")
    # The CPU runs fp32, and fp16 and bf16 as 16-bit storage; tf32 is unsupported (no bar).
    assert set(bars) == {"precision:fp32", "precision:fp16", "precision:bf16"}
    models = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    want = {(r.config["model"], r.config["precision"]): r for r in rs.ok}
    for p in ("fp32", "fp16", "bf16"):
        assert [b.get_height() for b in bars[f"precision:{p}"]] == pytest.approx(
            [want[(m, p)].data["metrics"]["throughput_img_s"] for m in models])
    labels = {t.get_gid(): t.get_text() for t in fig.axes[0].texts}
    for m in models:
        mfu = want[(m, "fp32")].data["metrics"]["achieved_flops_per_s"] / 2.0e11
        assert labels[f"mfu:{m}:fp32"] == f"MFU {100 * mfu:.1f}%"
        # no bf16 peak in the table above; the ratio to fp32 on a line of its own
        assert labels[f"mfu:{m}:bf16"].split("\n")[0] == "MFU n/a"
    # Below: each point's memory, stacked by category, as its record has it.
    memory = bars_by_gid(fig, "memory:")
    for (m, p), r in want.items():
        for cat, value in r.data["memory"]["peak_bytes_by_category"].items():
            if value:
                bar = memory[f"memory:{p}:{cat}"][models.index(m)]
                assert bar.get_height() == pytest.approx(value / 2**20)
    for m in models:  # 16-bit activations: half of fp32's, plus the loss's few f32 bytes
        act = {p: want[(m, p)].data["memory"]["peak_bytes_by_category"]["activations"]
               for p in ("fp32", "bf16", "fp16")}
        assert act["bf16"] == act["fp16"] and act["fp32"] / 2 <= act["bf16"] < act["fp32"] * 0.51
    # With the shipped table a CPU has no peak: the label says so, the footnote says why.
    fig = precision.render(rs.records)
    assert all(t.get_text().split("\n")[0] == "MFU n/a" for t in fig.axes[0].texts if t.get_gid())
    note = " ".join(fig.texts[0].get_text().split())  # the footnote wraps at any space
    assert "unsupported" in note and "no dense peak" in note


def test_overlap_plot_stacks_the_step(results):
    rs = load(results("overlap"))
    fig = overlap.render(rs.records)
    bars = bars_by_gid(fig, "segment:")
    ok = [r for r in rs.ok]
    # The plot sorts by (other axes, strategy); rebuild that order from the tick labels.
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    order = []
    for t in ticks:
        kv = dict(part.split("=") for part in t.split("\n"))
        order.append(next(r for r in ok if r.config["overlap"] == kv["overlap"] and
                          str(r.point_config["bucket_mb"]) == kv["bucket_mb"]))
    for i, r in enumerate(order):
        p, c = r.data["metrics"]["phases"], r.data["metrics"]["comm"]
        compute = 1e3 * (p["forward_s"] + p["loss_s"] + p["backward_s"] + p["optimizer_s"])
        assert bars["segment:forward"][i].get_height() == pytest.approx(
            1e3 * (p["forward_s"] + p["loss_s"]))
        assert bars["segment:backward"][i].get_height() == pytest.approx(1e3 * p["backward_s"])
        assert bars["segment:optimizer"][i].get_height() == pytest.approx(1e3 * p["optimizer_s"])
        assert bars["segment:exposed"][i].get_height() == pytest.approx(1e3 * c["comm_exposed_s"])
        # The fixtures predate comm_s: their comm is comm_busy_s, never the sum comm_total_s.
        hidden = bars["segment:hidden"][i]
        assert hidden.get_height() == pytest.approx(
            1e3 * (c["comm_busy_s"] - c["comm_exposed_s"]))
        # Hidden comm lies over the compute it runs under, from the bar's foot: not added on top.
        assert hidden.get_y() == 0 and hidden.get_height() <= compute + 1e-9
        # The segments add up to the traced step, exactly: no bar is taller than its step.
        shown = sum(bars[f"segment:{k}"][i].get_height()
                    for k in ("forward", "backward", "optimizer", "exposed", "other"))
        assert shown == pytest.approx(1e3 * p["step_s"])
        top = max(b.get_y() + b.get_height() for k, v in bars.items() for b in [v[i]])
        assert top == pytest.approx(1e3 * p["step_s"])
    # On each bar, the median of every timed step, which the table's 'saved vs none' compares.
    median = next(c for c in fig.axes[0].collections if c.get_gid() == "median")
    assert [y for _, y in median.get_offsets()] == pytest.approx(
        [1e3 * r.data["metrics"]["step_time_s"]["median"] for r in order])


def test_overlap_table_uses_the_plots_steps_and_says_what_overlap_saves(results):
    rs = load(results("overlap"))
    head, rows = overlap.table(rs.records)
    col = {h: i for i, h in enumerate(head)}
    for row in rows:
        r = next(x for x in rs.ok if str(x.data["point"]["index"]) == row[col["point"]])
        p, c = r.data["metrics"]["phases"], r.data["metrics"]["comm"]
        assert float(row[col["step ms"]]) == pytest.approx(1e3 * p["step_s"], abs=0.05)
        assert float(row[col["comm ms"]]) == pytest.approx(1e3 * c["comm_busy_s"], abs=0.05)
        none = next(x for x in rs.ok if x.config["overlap"] == "none" and
                    x.point_config["bucket_mb"] == r.point_config["bucket_mb"])
        if r is none:
            assert row[col["saved vs none"]] == ""
            continue
        base = none.data["metrics"]["step_time_s"]["median"]
        mine = r.data["metrics"]["step_time_s"]["median"]
        assert row[col["saved vs none"]] == (
            f"{(base - mine) * 1e3:+.1f} ms ({100 * (base - mine) / base:+.1f}%)")


def test_memory_plot_stacks_categories(results):
    rs = load(results("batch"))
    fig = memory.render(rs.records)
    bars = bars_by_gid(fig, "category:")
    for cat, patches in bars.items():
        name = cat.split(":", 1)[1]
        assert [p.get_height() for p in patches] == pytest.approx(
            [r.data["memory"]["peak_bytes_by_category"].get(name, 0) / 2**20 for r in rs.ok])
    total = lines_by_gid(fig)["total_peak"]
    assert list(total.get_ydata()) == pytest.approx(
        [r.data["memory"]["peak_bytes_total"] / 2**20 for r in rs.ok])


def test_memory_plot_draws_each_host_category_beside_the_stack_and_not_on_it(results):
    # A parameter server's copies (host_comm, config.sync async) are host memory too: a bar of
    # their own beside host_swap's, neither stacked on the device's categories.
    rs = load(results("batch"))
    rs.ok[0].data["memory"]["peak_bytes_by_category"]["host_swap"] = 3 * 2**20
    rs.ok[0].data["memory"]["peak_bytes_by_category"]["host_comm"] = 5 * 2**20
    fig = memory.render(rs.records)
    stacked = bars_by_gid(fig, "category:")
    assert "category:host_swap" not in stacked and "category:host_comm" not in stacked
    host = bars_by_gid(fig, "host:")
    assert [p.get_height() for p in host["host:host_comm"]] == pytest.approx([5.0])
    swap, comm = host["host:host_swap"][0], host["host:host_comm"][0]
    assert comm.get_x() >= swap.get_x() + swap.get_width()  # side by side, not overlapping


def test_memory_plot_draws_host_swap_beside_the_device_stack(results):
    # Swapped activations wait in host memory (config.swap): a bar of their own, not stacked on
    # the device's categories, whose heights the test checks as above.
    rs = load(results("batch"))
    rs.ok[0].data["memory"]["peak_bytes_by_category"]["host_swap"] = 3 * 2**20
    fig = memory.render(rs.records)
    assert "category:host_swap" not in bars_by_gid(fig, "category:")
    host = bars_by_gid(fig, "host:")["host:host_swap"]
    # One bar, beside the first point's stack: the points that swapped nothing have none.
    assert [p.get_height() for p in host] == pytest.approx([3.0])
    stack = bars_by_gid(fig, "category:")
    first = next(iter(stack.values()))[0]
    assert host[0].get_x() > first.get_x() + first.get_width() / 2
    for cat, patches in bars_by_gid(fig, "category:").items():
        name = cat.split(":", 1)[1]
        assert [p.get_height() for p in patches] == pytest.approx(
            [r.data["memory"]["peak_bytes_by_category"].get(name, 0) / 2**20 for r in rs.ok])


def test_timeline_gives_every_kind_of_pass_its_own_colour():
    """matplotlib's cycle of 10 drew the optimizer in the forward pass's blue."""
    from dlbench_reports.plots import timeline
    from dlbench_reports.records import schema_enum
    kinds = [c for c in schema_enum("span_category") if c != "step"]
    assert set(timeline.COLORS) == set(kinds)
    assert len({tuple(c) for c in timeline.COLORS.values()}) == len(kinds)


def test_timeline_names_a_lane_per_loader_thread():
    """The loader's worker threads take the loader's tid and those after it (tracer.h)."""
    from dlbench_reports.plots import timeline
    assert timeline.lane_label(0) == "compute" and timeline.lane_label(2) == "copy"
    assert timeline.lane_label(3) is None  # the host lane: the step's extent, not a bar
    assert timeline.lane_label(4) == "loader 0" and timeline.lane_label(6) == "loader 2"
    assert timeline.lane_label(-1) is None and timeline.lane_label("4") is None


def test_timeline_draws_one_step_of_every_rank(results):
    rs = load(results("overlap"))
    chosen = timeline.pick(rs.records, rs.resolve)
    assert chosen is not None and chosen.config["ranks"] == 2
    paths = timeline.trace_files(chosen, rs.resolve)
    fig = timeline.render(chosen, paths)
    traces = [timeline.read_trace(p) for p in paths]
    step_no, why = timeline.chosen_step(traces)
    events, start, end = timeline.one_step(traces)
    drawn, bars = {}, {}
    for coll in fig.axes[0].collections:
        gid = coll.get_gid()
        if gid and gid.startswith("lane:"):
            _, rank, tid, sub, cat = gid.split(":")
            key = (int(rank), int(tid), cat)
            drawn[key] = drawn.get(key, 0) + len(coll.get_paths())
            bars.setdefault((int(rank), int(tid), int(sub)), []).extend(
                (p.vertices[:, 0].min(), p.vertices[:, 0].max()) for p in coll.get_paths())
    want = {}
    for e in events:
        want[(e["pid"], e["tid"], e["cat"])] = want.get((e["pid"], e["tid"], e["cat"]), 0) + 1
    assert drawn == want
    assert {k[0] for k in drawn} == {0, 1} and any(k[2] == "allreduce" for k in drawn)
    assert math.isclose(fig.axes[0].get_xlim()[1], (end - start) / 1e3)
    # No two bars of one sub-lane overlap.
    for spans in bars.values():
        spans.sort()
        assert all(a[1] <= b[0] + 1e-9 for a, b in zip(spans, spans[1:]))
    # The step drawn is the median-length traced step of rank 0, and the title says which.
    lengths = sorted((e["dur"], e["args"]["step"]) for e in traces[0]["traceEvents"]
                     if e.get("ph") == "X" and e.get("cat") == "step")
    assert step_no == lengths[(len(lengths) - 1) // 2][1]
    assert all(e["args"]["step"] == step_no for e in events)
    assert fig.axes[0].get_title().startswith(f"Step {step_no}, {why}")
    assert "median-length" in why or len(lengths) == 1


def test_timeline_puts_concurrent_buckets_on_sub_lanes_with_their_names(results, tmp_path):
    """A hand-made trace in the span args dlbench writes: two buckets in flight together on
    rank 0's comm lane, and `none`'s one reduction of every bucket."""
    import json
    rs = load(results("overlap"))
    record = timeline.pick(rs.records, rs.resolve)
    def x(name, cat, tid, ts, dur, **args):
        return {"name": name, "cat": cat, "ph": "X", "pid": 0, "tid": tid, "ts": ts, "dur": dur,
                "args": dict(step=7, **args)}
    events = [x("step", "step", 3, 0, 1000), x("conv1", "forward", 0, 0, 400, pass_="forward"),
              x("allreduce", "allreduce", 1, 100, 500, bucket=0, bytes=4096),
              x("allreduce", "allreduce", 1, 200, 500, bucket=1, bytes=4096),
              x("allreduce", "allreduce", 1, 750, 200, bucket="all", bytes=8192)]
    path = tmp_path / "t.trace.json"
    path.write_text(json.dumps({"traceEvents": events, "otherData": {"origin_unix_us": 0}}))
    fig = timeline.render(record, [path])
    ax = fig.axes[0]
    rows = [t.get_text() for t in ax.get_yticklabels()]
    assert rows == ["rank 0 compute", "rank 0 comm", "rank 0 comm (2)"]
    labels = sorted(t.get_text() for t in ax.texts if (t.get_gid() or "").startswith("bucket:"))
    assert labels == ["all", "b0", "b1"]
    assert ax.get_title().startswith("Step 7, the only traced step")


def test_concurrent_buckets_go_on_sub_lanes():
    ev = [{"ts": 0, "dur": 10}, {"ts": 2, "dur": 3}, {"ts": 5, "dur": 10}, {"ts": 10, "dur": 2},
          {"ts": 12, "dur": 1}, {"ts": 14, "dur": 1}]
    # 0-10 on 0; 2-5 beside it on 1; 5-15 reuses 1 (ended at 5); 10-12 and 12-13 back on 0;
    # 14-15 on 0 (ended at 13).
    assert timeline.sub_lanes(ev) == [0, 1, 1, 0, 0, 0]
    nested = [{"ts": 0, "dur": 10}, {"ts": 1, "dur": 2}, {"ts": 2, "dur": 5}]
    assert timeline.sub_lanes(nested) == [0, 1, 2]
    assert timeline.sub_lanes([]) == []


def test_convergence_plot_draws_accuracy_against_time(results):
    rs = load(results("convergence"))
    fig = convergence.render(rs.records)
    lines = lines_by_gid(fig)
    legends = [t.get_text() for ax in fig.axes if ax.get_legend()
               for t in ax.get_legend().get_texts()]
    for r in rs.ok:
        c = r.data["metrics"]["convergence"]
        line = lines[f"accuracy:{r.data['point']['index']}"]
        assert list(line.get_ydata()) == pytest.approx([100 * a for a in c["eval_accuracy"]])
        # The fixture predates epoch_end_seconds: training time, summed, and a note says so.
        assert list(line.get_xdata()) == pytest.approx(
            [sum(c["epoch_train_seconds"][:i + 1]) for i in range(len(c["epoch_train_seconds"]))])
        assert any(f"{c['time_to_accuracy_s']:.1f} s ({c['epochs']} epochs)" in t
                   for t in legends)
    assert list(lines["target:1:95.0"].get_ydata()) == [95.0, 95.0]
    notes = " ".join(t.get_text().replace("\n", " ") for t in fig.texts)
    assert "leave out evaluation" in notes


def test_a_footnote_sits_under_a_legend_placed_under_the_axes(results):
    # The convergence plot's legend hangs under its axes; its note (this fixture's lines leave
    # out evaluation) once ran across the legend's entries.
    fig = convergence.render(load(results("convergence")).records)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    note = next(t for t in fig.texts if t.get_gid() == "footnote")
    below = note.get_window_extent(renderer)
    for ax in fig.axes:
        above = ax.get_tightbbox(renderer)  # tick labels, x label and the legend under them
        assert below.y1 <= above.y0, (below, above)


def test_convergence_plot_uses_time_to_accuracys_clock_and_a_panel_per_rank_count(results):
    import copy
    rs = load(results("convergence"))
    two = copy.deepcopy(rs.ok[0])
    two.data["config"]["ranks"] = 2
    two.data["point"]["index"] = 99
    for r in rs.ok + [two]:
        c = r.data["metrics"]["convergence"]
        ends = list(itertools.accumulate(s + 0.5 for s in c["epoch_train_seconds"]))
        c["epoch_end_seconds"] = ends
        c["time_to_accuracy_s"] = ends[-1]
    fig = convergence.render(rs.records + [two])
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == ["1 rank", "2 ranks"]
    lines = lines_by_gid(fig)
    for r in rs.ok + [two]:
        c = r.data["metrics"]["convergence"]
        xs = list(lines[f"accuracy:{r.data['point']['index']}"].get_xdata())
        assert xs == pytest.approx(c["epoch_end_seconds"])
        assert xs[-1] == pytest.approx(c["time_to_accuracy_s"])  # the line ends at its TTA
    assert "accuracy:99" in {l.get_gid() for l in panels[1].get_lines()}
    notes = " ".join(t.get_text() for t in fig.texts)
    assert "leave out evaluation" not in notes


def test_precision_plot_gives_each_bar_its_ratio_to_fp32_and_the_cpu_caveat(results):
    rs = load(results("precision"))
    fig = precision.render(rs.records, [])
    labels = {t.get_gid(): t.get_text() for t in fig.axes[0].texts if t.get_gid()}
    by = {(r.config["model"], r.config["precision"]): r for r in rs.ok
          if not r.config.get("cuda_graph")}
    checked = 0
    for (model, p), r in by.items():
        base = by.get((model, "fp32"))
        text = labels[f"mfu:{model}:{p}"]
        if p == "fp32" or base is None:
            assert "x fp32" not in text
            continue
        ratio = r.data["metrics"]["throughput_img_s"] / base.data["metrics"]["throughput_img_s"]
        assert f"{ratio:.2f}x fp32" in text
        checked += 1
    assert checked > 0
    notes = " ".join(t.get_text().replace("\n", " ") for t in fig.texts)
    assert "On a CPU, fp16 tensors, and bf16 ones where the CPU lacks AVX-512 BF16, are stored" in notes


def test_memory_tradeoff_plot_and_table_compare_each_technique_with_its_naive_point(results):
    # The fixture: the memory suite on the CPU (vgg16 and resnet50 at 64x64, batch 16): naive,
    # reuse, reuse with recompute=sqrt and reuse with swap=all, each with the largest batch
    # within 2 GiB.
    from dlbench_reports.plots import tradeoff
    rs = load(results("memory"))
    rows = tradeoff.rows(rs.records)
    by = {(d["model"], d["technique"]): d for d in rows}
    assert set(by) == {(m, t) for m in ("vgg16", "resnet50")
                       for t in ("naive", "reuse", "reuse, recompute sqrt", "reuse, swap all")}
    for (model, tech), d in by.items():
        r = d["record"]
        base = by[(model, "naive")]["record"]
        assert d["saved"] == pytest.approx(1 - r.data["memory"]["peak_bytes_total"]
                                           / base.data["memory"]["peak_bytes_total"])
        assert d["cost"] == pytest.approx(1 - r.data["metrics"]["throughput_img_s"]
                                          / base.data["metrics"]["throughput_img_s"])
        assert d["max_batch"] == r.data["metrics"]["max_batch"]["batch"]
    # What the plot draws: one marker per technique that is not the baseline, at (saved, cost).
    fig = tradeoff.render(rs.records)
    points = {c.get_gid(): c.get_offsets()[0] for ax in fig.axes for c in ax.collections
              if c.get_gid()}
    assert set(points) == {f"point:{m}:{t}" for (m, t) in by if t != "naive"}
    for (m, t), d in by.items():
        if t != "naive":
            assert list(points[f"point:{m}:{t}"]) == pytest.approx(
                [100 * d["saved"], 100 * d["cost"]])
    header, table = tradeoff.table(rs.records)
    assert len(table) == 8 and header[2] == "technique"
    # Reuse saves memory and fits a larger batch; recomputation more again, for resnet50.
    assert by[("resnet50", "reuse")]["saved"] > 0.3
    assert (by[("resnet50", "reuse, recompute sqrt")]["max_batch"]
            > by[("resnet50", "reuse")]["max_batch"] > by[("resnet50", "naive")]["max_batch"])
    # Swapping: its host copies are host memory, not in the device's peak it saves.
    swapped = by[("resnet50", "reuse, swap all")]
    assert swapped["max_batch"] > by[("resnet50", "reuse")]["max_batch"]
    host = swapped["record"].data["memory"]["peak_bytes_by_category"]["host_swap"]
    assert host > 0 and swapped["record"].data["memory"]["peak_bytes_total"] < (
        by[("resnet50", "reuse")]["record"].data["memory"]["peak_bytes_total"])


def test_memory_tradeoff_needs_a_naive_point_with_the_same_settings(results):
    from dlbench_reports.plots import tradeoff
    rs = load(results("memory"))
    no_naive = [r for r in rs.records if tradeoff.technique(r) != "naive"]
    assert tradeoff.rows(no_naive) == [] and tradeoff.render(no_naive) is None
    assert tradeoff.table(no_naive) is None


def variant(base, index, **config):
    """A copy of `base` as another point of the suite: its config and suite config updated."""
    r = copy.deepcopy(base)
    r.data["point"]["index"] = index
    r.data["config"].update(config)
    r.data["suite_config"] = dict(r.data.get("suite_config", {}), **config)
    return r


def test_sync_modes_plot_bars_time_to_accuracy_and_throughput_per_mode(results):
    base = load(results("convergence")).ok[0]
    made, i = {}, 10
    for mode in ("sync", "stale:1", "async"):
        for straggler in (None, "1:2"):
            r = variant(base, i, ranks=2, sync=mode, straggler=straggler)
            c = r.data["metrics"]["convergence"]
            c["time_to_accuracy_s"] = 1.0 + i / 10
            r.data["metrics"]["throughput_img_s"] = 1000.0 * i
            made[(mode, straggler)] = r
            i += 1
    missed = made[("async", "1:2")].data["metrics"]["convergence"]
    missed.update(reached=False, status="aborted", time_to_accuracy_s=None, run_seconds=9.5)
    fig = sync_modes.render(list(made.values()) + [base])  # the 1-rank point: no panel
    tta, tput = bars_by_gid(fig, "tta:"), bars_by_gid(fig, "tput:")
    assert sorted(tta) == ["tta:2:async", "tta:2:stale:1", "tta:2:sync"]
    for mode in ("sync", "stale:1", "async"):
        want = [made[(mode, s)].data["metrics"]["convergence"]["time_to_accuracy_s"]
                for s in (None, "1:2")]
        if mode == "async":
            want[1] = 9.5  # not reached: the run's length, marked
        assert [p.get_height() for p in tta[f"tta:2:{mode}"]] == pytest.approx(want)
        assert [p.get_height() for p in tput[f"tput:2:{mode}"]] == pytest.approx(
            [made[(mode, s)].data["metrics"]["throughput_img_s"] for s in (None, "1:2")])
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["no straggler",
                                                                      "straggler 1:2"]


def test_staleness_plot_puts_async_at_its_measured_median(results):
    base = load(results("convergence")).ok[0]
    rs = [variant(base, 20, ranks=2, sync="sync"), variant(base, 21, ranks=2, sync="stale:4"),
          variant(base, 22, ranks=2, sync="async")]
    rs[2].data["metrics"]["async"] = {"updates": 10, "staleness_median": 1.5,
                                      "staleness_max": 4, "transport": "host copies"}
    for i, r in enumerate(rs):
        r.data["metrics"]["throughput_img_s"] = 100.0 * (i + 1)
    line = lines_by_gid(sync_modes.render_staleness(rs))["staleness:2:none"]
    assert list(line.get_xdata()) == [0.0, 1.5, 4.0]
    assert list(line.get_ydata()) == [100.0, 300.0, 200.0]


def test_global_batch_plot_draws_the_best_accuracy_with_and_without_the_rules(results):
    base = load(results("convergence")).ok[0]
    rs, i = [], 30
    for batch_size in (32, 64, 128):
        for rules in (False, True):
            extra = {"lr_scaling": "linear", "lr_reference_batch": 32, "lr_warmup": "5epochs"}
            r = variant(base, i, batch=batch_size, **(extra if rules else {}))
            r.data["metrics"]["convergence"]["eval_accuracy"] = [0.5, 0.9 - i / 1000, 0.8]
            rs.append(r)
            i += 1
    lines = lines_by_gid(global_batch.render(rs))
    constant = lines["batch:constant rate"]
    ruled = lines["batch:linear scaling (reference 32), warm-up 5epochs"]
    assert list(constant.get_xdata()) == [32, 64, 128]
    best = {n: 100 * (0.9 - n / 1000) for n in range(30, 36)}
    assert list(constant.get_ydata()) == pytest.approx([best[n] for n in (30, 32, 34)])
    assert list(ruled.get_ydata()) == pytest.approx([best[n] for n in (31, 33, 35)])
    # Two batches are not a sweep.
    assert global_batch.render(rs[:4]) is None


def test_algorithms_plots_draw_each_layer_per_policy_and_each_policy_per_limit(results):
    from dlbench_reports.plots import algorithms
    from dlbench_reports.records import read_json_file
    rs = load(results("algorithms"))
    fig = algorithms.render_layers(rs.records, rs.resolve)
    bars = bars_by_gid(fig, "policy:")
    assert set(bars) == {"policy:im2col", "policy:onednn", "policy:winograd", "policy:heuristic"}
    unlimited = [r for r in rs.ok if r.config["workspace_limit"] is None]
    for r in unlimited:
        profile = read_json_file(rs.resolve(r.get("paths.profile")), "profile")
        want = [sum(layer[p] or 0 for p in algorithms.PASSES) for layer in profile["layers"]
                if layer["kind"] == "conv2d"]
        got = [b.get_height() for b in bars[f"policy:{r.config['conv_algo']}"]]
        assert got == pytest.approx(want) and len(want) == 2, r.config["conv_algo"]
    assert len(fig.axes[0].get_legend().get_texts()) <= 6

    fig = algorithms.render_limits(rs.records)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == [
        "128KiB", "256KiB", "1MiB", "none"]
    lines = lines_by_gid(fig)
    assert set(lines) == {"policy:im2col", "policy:onednn", "policy:winograd", "policy:heuristic"}
    # a point that failed (no algorithm the policy may take fits) has no marker
    for name, line in lines.items():
        drawn = [not math.isnan(y) for y in line.get_ydata()]
        ok = {algorithms.limit_bytes(r.config["workspace_limit"]) for r in rs.ok
              if r.config["conv_algo"] == name.split(":")[1]}
        limits = sorted({algorithms.limit_bytes(r.config["workspace_limit"]) for r in rs.records})
        assert drawn == [v in ok for v in limits], name
    r = next(r for r in rs.ok if r.config["conv_algo"] == "heuristic"
             and r.config["workspace_limit"] is None)
    assert lines["policy:heuristic"].get_ydata()[3] == pytest.approx(
        1e3 * r.get("metrics.step_time_s.median"))
    assert algorithms.limit_bytes("1MiB") == 2**20 and algorithms.limit_bytes(None) == math.inf
    with pytest.raises(Exception, match="not a size"):
        algorithms.limit_bytes("lots")


def test_algorithms_plots_name_what_they_cannot_draw_and_never_fail(results, tmp_path):
    from dlbench_reports.plots import algorithms
    rs = load(results("algorithms"))
    records = copy.deepcopy(rs.records)
    unlimited = [r for r in records if r.ok and r.config["workspace_limit"] is None]
    bad_profile = tmp_path / "profiles" / "bad.profile.json"
    bad_profile.parent.mkdir()
    bad_profile.write_text('{"layers": [{"kind": "conv2d", "name": "c", "forward_ms": "fast"}]}')
    for r, path in zip(unlimited, ["bad\x00path", str(tmp_path), str(bad_profile), "x" * 5000]):
        r.data["paths"]["profile"] = path
    limited = [r for r in records if r.config["workspace_limit"] is not None]
    for r, limit in zip(limited, ["1.2.3MiB", "1e999", "e", "-4KiB", "0B"]):
        r.config["workspace_limit"] = limit
    skipped = []
    assert algorithms.render_layers(records, rs.resolve, skipped) is None  # no readable profile
    assert len(skipped) == 4 and all("the algorithms plot of point" in s for s in skipped)
    fig = algorithms.render_limits(records)
    note = " ".join(" ".join(t.get_text() for t in fig.texts).split())  # unwrapped
    assert "not drawn (a workspace limit or step time that is not a size" in note
    for limit in ["1.2.3MiB", "1e999", "e", "-4KiB", "0B", "lots", "4 4MiB"]:
        with pytest.raises(Exception, match="workspace_limit"):
            algorithms.limit_bytes(limit)
    assert algorithms.limit_bytes("1.5KiB") == 1536 and algorithms.limit_bytes("2e3") == 2000
    # points that differ in anything but the policy and the limit are plotted apart
    other = copy.deepcopy(rs.records[0])
    other.point_config["model"] = "resnet18"
    assert len(algorithms.groups(rs.records + [other])) == 2


def test_input_plot_keeps_gpu_decoding_apart_with_its_synthetic_line(tmp_path):
    """A point decoded on the GPU (--decode=gpu) is its own series, labelled so, and borrows
    the synthetic point of its training, which decodes nothing."""
    from dlbench_reports.plots import input as input_plot
    from dlbench_reports.records import Record

    def record(line, data, threads=None, decode=None, rate=100.0):
        suite = {"model": "resnet18", "data": data}
        config = {"model": "resnet18", "data": data, "decode": decode or "cpu"}
        if threads:
            suite["loader_threads"] = threads
        if decode:
            suite["decode"] = decode
        metrics = {"throughput_img_s": rate}
        if data == "folder":
            metrics["input"] = {"threads": threads, "loader_img_s": 3 * rate,
                                "verdict": "ok", "wait_share_of_step": 0.01}
        return Record({"status": "ok", "config": config, "suite_config": suite,
                       "metrics": metrics, "point": {"id": str(line)}}, tmp_path, line)

    records = [record(1, "synthetic", rate=500.0), record(2, "folder", 1, rate=200.0),
               record(3, "folder", 2, rate=300.0), record(4, "folder", 1, "gpu", rate=450.0)]
    found = input_plot.groups(records)
    assert len(found) == 2
    by_label = {input_plot.series(g)["model"]: input_plot.series(g) for g in found}
    assert set(by_label) == {"resnet18", "resnet18 (GPU decode)"}
    assert by_label["resnet18"]["threads"] == [1, 2]
    assert by_label["resnet18 (GPU decode)"]["throughput"] == [450.0]
    assert all(s["synthetic"] == 500.0 for s in by_label.values())
