"""ci/perf_gate.py on committed records with planted changes."""
from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from conftest import ROOT

GATE = ROOT / "ci" / "perf_gate.py"


def edit(path, index, change):
    lines = path.read_text().splitlines()
    rec = json.loads(lines[index])
    change(rec)
    lines[index] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")


def run_gate(baseline, current, *extra):
    p = subprocess.run([sys.executable, str(GATE), f"--baseline={baseline}",
                        f"--current={current}", *extra], capture_output=True, text=True)
    verdict = current / "perf_gate.json"
    return p, (json.loads(verdict.read_text()) if verdict.exists() else None)


def scale_steps(factor, noise=0.0, seed=1):
    rng = random.Random(seed)

    def change(rec):
        st = rec["metrics"]["step_time_s"]
        st["all"] = [t * factor * (1 + rng.uniform(-noise, noise)) for t in st["all"]]
    return change


def failed_points(verdict):
    return [p["point"] for p in verdict["points"] if p["verdict"] == "fail"]


def test_identical_runs_pass(results):
    base = results("ci")
    cur = base
    p, v = run_gate(base, cur)
    assert p.returncode == 0, p.stdout + p.stderr
    assert v["verdict"] == "pass" and failed_points(v) == []


def test_flags_a_planted_20_percent_slowdown(results, tmp_path):
    base = results("ci")
    cur = tmp_path / "current"
    cur.mkdir()
    (cur / "results.jsonl").write_text((base / "results.jsonl").read_text())
    edit(cur / "results.jsonl", 1, scale_steps(1.20, noise=0.01))
    p, v = run_gate(base, cur)
    assert p.returncode == 1, p.stdout
    assert failed_points(v) == ["resnet18 b8 32px fp32 1r none"]
    step = [c for c in v["points"][1]["checks"] if c["metric"].startswith("step_time")][0]
    assert step["p_value"] < 0.01 and step["change"] == pytest.approx(0.20, abs=0.02)
    assert "FAIL" in p.stdout and "slower" in p.stdout


def test_passes_2_percent_noise(results, tmp_path):
    base = results("ci")
    cur = tmp_path / "current"
    cur.mkdir()
    (cur / "results.jsonl").write_text((base / "results.jsonl").read_text())
    for i in range(3):
        edit(cur / "results.jsonl", i, scale_steps(1.02, noise=0.02, seed=i))
    p, v = run_gate(base, cur)
    assert p.returncode == 0, p.stdout
    assert v["verdict"] == "pass"


def test_flags_a_one_byte_change_in_peak_memory(results, tmp_path):
    base = results("ci")
    cur = tmp_path / "current"
    cur.mkdir()
    (cur / "results.jsonl").write_text((base / "results.jsonl").read_text())

    def one_more_byte(rec):
        rec["memory"]["peak_bytes_total"] += 1
    edit(cur / "results.jsonl", 0, one_more_byte)
    p, v = run_gate(base, cur)
    assert p.returncode == 1
    check = [c for c in v["points"][0]["checks"] if c["metric"] == "memory.peak_bytes_total"][0]
    assert check["verdict"] == "fail" and check["current"] - check["baseline"] == 1


def test_a_missing_metric_is_reported_not_ignored(results, tmp_path):
    base = results("ci")
    cur = tmp_path / "current"
    cur.mkdir()
    (cur / "results.jsonl").write_text((base / "results.jsonl").read_text())

    def drop(rec):
        del rec["metrics"]["step_time_s"]["all"]
        del rec["memory"]["peak_bytes_by_category"]["activations"]
    edit(cur / "results.jsonl", 2, drop)
    p, v = run_gate(base, cur)
    assert p.returncode == 1
    why = {c["metric"]: c["why"] for c in v["points"][2]["checks"] if c["verdict"] == "fail"}
    assert why == {"step_time_s": f"missing in the current ({cur / 'results.jsonl'}:3)",
                   "memory.peak_bytes_by_category.activations": "missing in the current"}


def test_a_point_missing_from_the_current_run_fails(results, tmp_path):
    base = results("ci")
    cur = tmp_path / "current"
    cur.mkdir()
    lines = (base / "results.jsonl").read_text().splitlines()
    (cur / "results.jsonl").write_text("\n".join(lines[:2]) + "\n")
    p, v = run_gate(base, cur)
    assert p.returncode == 1
    assert [p_["why"] for p_ in v["points"] if p_["verdict"] == "fail"] == \
        ["missing in the current run"]


def test_malformed_current_exits_2_naming_the_line(results, tmp_path):
    base = results("ci")
    cur = tmp_path / "current"
    cur.mkdir()
    (cur / "results.jsonl").write_text((base / "results.jsonl").read_text() + '{"status": "ok"\n')
    p, v = run_gate(base, cur)
    assert p.returncode == 2 and v is None
    assert f"{cur / 'results.jsonl'}:4: not valid JSON" in p.stderr


@pytest.mark.parametrize("text, value", [("5%", 0.05), ("0.1", 0.1), ("20", 0.2)])
def test_threshold_forms(text, value):
    sys.path.insert(0, str(GATE.parent))
    import perf_gate
    assert perf_gate.parse_threshold(text) == pytest.approx(value)


def test_a_point_that_no_longer_ends_ok_fails(results, tmp_path):
    base = results("ci")
    cur = tmp_path / "current"
    cur.mkdir()
    (cur / "results.jsonl").write_text((base / "results.jsonl").read_text())

    def time_out(rec):
        rec["status"] = "timeout"
        rec["message"] = "no result within --timeout=900 s"
    edit(cur / "results.jsonl", 2, time_out)
    p, v = run_gate(base, cur)
    assert p.returncode == 1
    check = v["points"][2]["checks"][0]
    assert check["metric"] == "status" and check["current"] == "timeout"
    assert "no result within" in check["why"]
