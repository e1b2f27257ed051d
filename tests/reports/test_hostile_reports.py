"""Hostile inputs to the reports (round 3): records the schema accepts but the reports could not
handle, micro results of the wrong shape, paths that are not regular files, and inputs that made
a plot grow without bound. Each is handled, or refused with one line naming the file and the key
(exit 2); nothing is left half written."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest
from dlbench_reports import micro
from dlbench_reports.compare import compare
from dlbench_reports.plots import convergence, timeline
from dlbench_reports.records import RecordError, load, read_json_file, read_records
from dlbench_reports.report import build

from conftest import ROOT


def rewrite(path, change):
    """Applies change(record) to every record of a results.jsonl."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for r in records:
        change(r)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def cli(*args):
    return subprocess.run([sys.executable, "-m", "dlbench_reports", *map(str, args)],
                          cwd=ROOT / "reports", capture_output=True, text=True, timeout=300)


# 8: schema-valid records the reports could not handle.

def test_compare_takes_an_ok_peer_record_without_an_image_size(results):
    d = results("peers")

    def no_image_size(r):
        if r["config"].get("system") == "pytorch":
            r["config"]["image_size"] = None
    rewrite(d / "results.jsonl", no_image_size)
    read_records(d)  # the schema allows it
    header, table, legend = compare([str(d)])
    assert any(row[1] == "?px" for row in table), table
    assert any(row[1] == "32px" for row in table), table


def test_a_target_reached_without_its_time_is_reported_not_a_crash(results, capsys):
    d = results("convergence")

    def no_time(r):
        r["metrics"]["convergence"]["time_to_accuracy_s"] = None
    rewrite(d / "results.jsonl", no_time)
    rs = load(d)
    assert all(r.data["metrics"]["convergence"]["reached"] for r in rs.ok)
    fig = convergence.render(rs.records)
    texts = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert texts and all(": reached, time not recorded (" in t for t in texts), texts
    report = build(d, [])
    assert "time not recorded" in report.markdown.read_text()
    header, table, legend = compare([str(d)])
    assert all(row[-1] == "-" for row in table), table  # no time to accuracy to compare


def test_convergence_lists_of_different_lengths_draw_the_epochs_with_both(results):
    d = results("convergence")

    def one_accuracy(r):
        conv = r["metrics"]["convergence"]
        conv["eval_accuracy"] = conv["eval_accuracy"][:1]
    rewrite(d / "results.jsonl", one_accuracy)
    fig = convergence.render(load(d).records)
    for line in fig.axes[0].get_lines():
        if (line.get_gid() or "").startswith("accuracy:"):
            assert len(line.get_xdata()) == len(line.get_ydata()) == 1


def test_a_number_too_large_for_a_double_is_refused_like_infinity(results):
    d = results("scaling")
    lines = (d / "results.jsonl").read_text().splitlines(keepends=True)
    rec = json.loads(lines[0])
    rec["metrics"]["throughput_img_s"] = 1.0
    text = json.dumps(rec)
    lines[0] = text.replace('"throughput_img_s": 1.0', '"throughput_img_s": 1e999') + "\n"
    (d / "results.jsonl").write_text("".join(lines))
    with pytest.raises(RecordError, match=r"results\.jsonl:1: not valid JSON: 1e999"):
        read_records(d)


# 9: the micro report's input, checked up front.

def micro_dir(results, change):
    d = results("micro")
    data = json.loads((d / "micro.json").read_text())
    change(data)
    (d / "micro.json").write_text(json.dumps(data))
    return d


@pytest.mark.parametrize("change, message", [
    (lambda d: d["benchmarks"][0].update({"FLOP/s": "1e11"}), r"benchmarks\[0\]: 'FLOP/s' must"),
    (lambda d: d["benchmarks"][0].update({"name": 5}), r"benchmarks\[0\]: .*string 'name'"),
    (lambda d: d["context"].update({"peak cpu fp32 flops_per_s": "fast"}),
     r"context \"peak cpu fp32 flops_per_s\": expected a positive number"),
    (lambda d: d["benchmarks"][0].update({"time_unit": 3}), r"benchmarks\[0\]: 'time_unit'"),
    (lambda d: d["benchmarks"][0].update({"error_occurred": "yes"}), r"'error_occurred'"),
], ids=["rate a string", "name a number", "peak text", "time unit a number", "error flag text"])
def test_micro_json_of_the_wrong_shape_is_one_line_naming_the_key(results, change, message):
    d = micro_dir(results, change)
    with pytest.raises(RecordError, match=message):
        micro.render(d)
    p = cli("micro", d)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and str(d / "micro.json") in p.stderr
    assert not (d / "micro.md").exists()


@pytest.mark.parametrize("rows, message", [
    ([[8, 2, 0.1]], r"rows\[0\]: an all-reduce row must be an object"),
    ({"bytes": 8}, r"an object with a 'rows' list"),
    ([{"bytes": 8, "time_s": 1e-5, "algbw_gbs": 1.0, "reference_busbw_gbs": 1.0}],
     r"rows\[0\]: 'busbw_gbs' is missing"),
], ids=["rows of lists", "rows an object", "a column missing"])
def test_allreduce_results_of_the_wrong_shape_are_refused(results, rows, message):
    d = results("micro")
    ar = json.loads((d / "allreduce-mpi.json").read_text())
    ar["rows"] = rows
    (d / "allreduce-mpi.json").write_text(json.dumps(ar))
    with pytest.raises(RecordError, match=message):
        micro.render(d)
    assert not (d / "micro.md").exists()


def test_non_finite_counters_are_shown_as_n_a(results):
    """Google Benchmark writes NaN and Infinity for a counter over a zero time or peak."""
    d = results("micro")
    text = (d / "micro.json").read_text()
    data = json.loads(text)
    first = data["benchmarks"][0]
    first["of_peak"], first["FLOP/s"] = float("inf"), float("nan")
    (d / "micro.json").write_text(json.dumps(data))  # Infinity and NaN literals
    md, files = micro.render(d)
    line = next(l for l in md.read_text().splitlines() if first["label"] in l and "| n/a |" in l)
    assert "| n/a | n/a |" in line
    assert files


# 10: paths that are not regular files.

def test_a_trace_that_is_dev_zero_or_a_fifo_is_skipped_and_named(results, tmp_path):
    d = results("overlap")
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    for target in ("/dev/zero", str(fifo)):
        def point_at(r):
            if r.get("paths", {}).get("traces"):
                r["paths"]["traces"] = [target] * len(r["paths"]["traces"])
        rewrite(d / "results.jsonl", point_at)
        skipped: list[str] = []
        assert timeline.pick(load(d).records, load(d).resolve, skipped) is None
        assert skipped and all(target in s and "not a regular file" in s for s in skipped)
        p = cli("report", d)
        assert p.returncode == 0, p.stderr
        assert "report: skipped the timeline of point" in p.stdout and target in p.stdout
        assert target in (d / "report.md").read_text()


def test_a_fifo_or_device_is_refused_without_reading_it(tmp_path):
    fifo = tmp_path / "x.json"
    os.mkfifo(fifo)
    done = []
    worker = threading.Thread(target=lambda: done.append(pytest.raises(
        RecordError, read_json_file, fifo, "a trace")), daemon=True)
    worker.start()
    worker.join(10)
    assert done, "reading a FIFO blocked"
    with pytest.raises(RecordError, match="a character device, not a regular file"):
        read_json_file("/dev/zero", "a trace")
    os.mkfifo(tmp_path / "results.jsonl")
    with pytest.raises(RecordError, match=r"results\.jsonl: cannot read records: a FIFO"):
        read_records(tmp_path)


def test_check_mllog_refuses_a_device():
    p = cli("check-mllog", "/dev/zero")
    assert p.returncode == 2 and "not a regular file" in p.stderr and "Traceback" not in p.stderr


# 13: plots whose size does not grow with the input.

def test_the_conv_plot_draws_a_bounded_number_of_layers_and_says_so(results):
    d = results("micro")
    data = json.loads((d / "micro.json").read_text())
    row = next(b for b in data["benchmarks"] if b["name"].startswith("conv/"))
    parts = row["name"].split("/")
    n = 5000
    data["benchmarks"] = [dict(row, name="/".join(parts[:4] + [f"m.layer{i}"] + parts[5:]),
                               of_peak=1.0 - i / n) for i in range(n)]
    rows = micro.parse_rows(data, "micro.json")
    fig = micro.conv_plot(rows, "cpu", "fp32")
    limit = micro.MAX_CONV_LAYERS_DRAWN
    assert fig.get_figwidth() <= max(8.0, 0.32 * limit)
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert len(labels) == limit
    assert labels[-1] == f"m.layer{n - 1}"  # the ones furthest from the peak
    assert any(f"{limit} of {n} convolutions drawn" in t.get_text() for t in fig.texts)
