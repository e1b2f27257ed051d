"""The micro suite's report (dlbench_reports.micro): every row's fraction of the measured peak,
the convolutions furthest from it, and refusals of files that are not Google Benchmark's output.
The fixture is part of a real `dlbench --suite=micro` run on the CPU (GEMM fp32, five layers'
convolutions in every precision, a 2-rank MPI all-reduce)."""
from __future__ import annotations

import json

import pytest

from dlbench_reports.micro import furthest_from_peak, parse_rows, peaks, render
from dlbench_reports.records import RecordError


def test_every_row_is_its_rate_over_the_peak(results):
    d = results("micro")
    data = json.loads((d / "micro.json").read_text())
    pk = peaks(data["context"])
    rows = parse_rows(data, "micro.json")
    assert {r.kind for r in rows} == {"gemm", "conv"}
    for r in rows:
        # A precision's own peak where the machine has one (bf16 with AVX-512 BF16), else
        # fp32's: the CPU computes the other 16-bit rows in f32.
        peak = pk.get((r.backend, r.precision), pk[(r.backend, "fp32")])["flops_per_s"]
        assert r.of_peak == pytest.approx(r.rate / peak, rel=1e-5), r
    # Three passes of each of the five layers, two algorithms, three precisions.
    assert len([r for r in rows if r.kind == "conv"]) == 5 * 3 * 2 * 3


def test_furthest_from_peak_takes_each_pass_at_its_best_algorithm(results):
    d = results("micro")
    rows = parse_rows(json.loads((d / "micro.json").read_text()), "micro.json")
    got = furthest_from_peak(rows)
    fp32 = [(top, rs) for top, rs in got if top.precision == "fp32"]
    assert len(fp32) == 3
    best = {}
    for r in rows:
        if r.kind == "conv" and r.precision == "fp32":
            k = (r.what, r.pass_)
            best[k] = max(best.get(k, 0), r.of_peak)
    want = sorted(best.values())[:3]
    assert [top.of_peak for top, _ in fp32] == want
    for top, rs in fp32:
        assert top.of_peak == max(r.of_peak for r in rs) and len(rs) == 2


def test_report_has_every_section_and_a_plot_per_precision(results):
    d = results("micro")
    md, files = render(d)
    text = md.read_text()
    for heading in ("## The peak each row is a fraction of", "## GEMM at the models' linear layers",
                    "## Convolutions of resnet50 and vgg16", "### Furthest from the peak",
                    "## All-reduce (mpi, 2 ranks)"):
        assert heading in text, heading
    ar = json.loads((d / "allreduce-mpi.json").read_text())
    peak = peaks(json.loads((d / "micro.json").read_text())["context"])[("cpu", "fp32")]
    last = ar["rows"][-1]
    assert f"{100 * last['busbw_gbs'] * 1e9 / peak['bytes_per_s']:.0f}%" in text
    assert sorted(f.name for f in files if f.suffix == ".png") == [
        "micro-conv-cpu-bf16.png", "micro-conv-cpu-fp16.png", "micro-conv-cpu-fp32.png"]


def test_a_row_that_failed_is_listed_and_the_others_still_render(results):
    d = results("micro")
    data = json.loads((d / "micro.json").read_text())
    row = data["benchmarks"][0]
    row.update(error_occurred=True, error_message="cuDNN refused the plan")
    for key in ("FLOP/s", "of_peak"):
        row.pop(key)
    (d / "micro.json").write_text(json.dumps(data))
    md, _ = render(d)
    text = md.read_text()
    assert "## Rows that failed (1)" in text and "cuDNN refused the plan" in text
    assert row["name"].removesuffix("/manual_time") in text


def test_files_that_are_not_micro_results_are_refused(tmp_path):
    (tmp_path / "micro.json").write_text('{"benchmarks": []}')
    with pytest.raises(RecordError, match="not Google Benchmark's JSON"):
        render(tmp_path)
    (tmp_path / "micro.json").write_text(json.dumps({"context": {}, "benchmarks": [
        {"name": "conv/cpu/fp32/onednn", "real_time": 1, "time_unit": "ms"}]}))
    with pytest.raises(RecordError, match="not a dlbench micro row"):
        render(tmp_path)
    (tmp_path / "micro.json").write_text("{not json")
    with pytest.raises(RecordError):
        render(tmp_path)
