"""Malformed or partial records give an error that names the file and the line."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from dlbench_reports.plots import scaling
from dlbench_reports.records import RecordError, load, read_records

from conftest import ROOT


def lines_of(path):
    return path.read_text().splitlines(keepends=True)


def test_invalid_json_names_file_and_line(results):
    d = results("scaling")
    lines = lines_of(d / "results.jsonl")
    lines[2] = lines[2][:40] + "\n"
    (d / "results.jsonl").write_text("".join(lines))
    with pytest.raises(RecordError, match=r"results\.jsonl:3: not valid JSON"):
        read_records(d)


def test_partial_last_line_is_named(results):
    d = results("scaling")
    text = (d / "results.jsonl").read_text()
    (d / "results.jsonl").write_text(text[:-200])  # a writer killed mid-line
    n = text[:-200].count("\n") + 1
    with pytest.raises(RecordError, match=rf"results\.jsonl:{n}: partial record"):
        read_records(d)


def test_record_breaking_the_schema_is_named(results):
    d = results("batch")
    lines = lines_of(d / "results.jsonl")
    rec = json.loads(lines[1])
    del rec["status"]
    lines[1] = json.dumps(rec) + "\n"
    (d / "results.jsonl").write_text("".join(lines))
    with pytest.raises(RecordError, match=r"results\.jsonl:2: not a dlbench result record: "
                                          r"'status' is a required property"):
        read_records(d)


def test_missing_metric_a_plot_needs_is_named(results):
    d = results("scaling")
    lines = lines_of(d / "results.jsonl")
    rec = json.loads(lines[4])
    del rec["metrics"]["throughput_img_s"]
    lines[4] = json.dumps(rec) + "\n"
    (d / "results.jsonl").write_text("".join(lines))
    with pytest.raises(RecordError, match=r"results\.jsonl:5: .* has no 'metrics\.throughput_img_s'"):
        scaling.render(load(d).records)


def test_missing_directory_and_empty_file(tmp_path):
    with pytest.raises(RecordError, match="not a directory"):
        load(tmp_path / "nope")
    (tmp_path / "results.jsonl").write_text("")
    with pytest.raises(RecordError, match="holds no records"):
        load(tmp_path)


def test_cli_exits_2_with_the_message(results):
    d = results("batch")
    (d / "results.jsonl").write_text("{not json}\n")
    p = subprocess.run([sys.executable, "-m", "dlbench_reports", "report", str(d)],
                       cwd=ROOT / "reports", capture_output=True, text=True)
    assert p.returncode == 2
    assert f"{d}/results.jsonl:1: not valid JSON" in p.stderr
    assert not (d / "report.md").exists()


def test_resumed_sweep_keeps_the_latest_record_per_point(results):
    d = results("batch")
    lines = lines_of(d / "results.jsonl")
    rec = json.loads(lines[0])
    rec["metrics"]["throughput_img_s"] = 12345.0
    (d / "results.jsonl").write_text("".join(lines) + json.dumps(rec) + "\n")
    rs = load(d)
    assert len(rs.records) == len(lines)
    assert rs.records[0].data["metrics"]["throughput_img_s"] == 12345.0
