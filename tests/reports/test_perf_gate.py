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


def keep_steps(n, factor=1.0):
    def change(rec):
        st = rec["metrics"]["step_time_s"]
        st["all"] = [t * factor for t in st["all"][:n]]
    return change


def test_a_planted_30_percent_slowdown_on_3_steps_is_inconclusive_not_a_pass(results, tmp_path):
    # 3 steps a side: the exact test's smallest two-sided p is 2 / C(6, 3) = 0.1, so p < 0.01 is
    # out of reach whatever the steps say. Before, this printed "pass: not significant".
    base_dir = results("ci")
    base, cur = tmp_path / "base", tmp_path / "current"
    base.mkdir()
    cur.mkdir()
    (base / "results.jsonl").write_text((base_dir / "results.jsonl").read_text())
    (cur / "results.jsonl").write_text((base_dir / "results.jsonl").read_text())
    edit(base / "results.jsonl", 1, keep_steps(3))
    edit(cur / "results.jsonl", 1, keep_steps(3, factor=1.30))
    p, v = run_gate(base, cur)
    assert p.returncode == 1, p.stdout
    assert v["verdict"] == "inconclusive" and v["inconclusive_points"] == 1
    point = v["points"][1]
    assert point["verdict"] == "inconclusive"
    step = [c for c in point["checks"] if c["metric"].startswith("step_time")][0]
    assert step["verdict"] == "inconclusive"
    assert "3 and 3 timed steps cannot reach p < 0.01 (at best p = 0.1)" in step["why"]
    assert "needs 5 a side" in step["why"]
    assert "INCONCLUSIVE" in p.stdout
    # --allow-inconclusive: a warning and exit 0; the verdict file still says inconclusive.
    p, v = run_gate(base, cur, "--allow-inconclusive")
    assert p.returncode == 0 and "inconclusive" in p.stderr
    assert v["verdict"] == "inconclusive"


def test_a_regression_elsewhere_still_fails_beside_an_inconclusive_point(results, tmp_path):
    base_dir = results("ci")
    base, cur = tmp_path / "base", tmp_path / "current"
    base.mkdir()
    cur.mkdir()
    (base / "results.jsonl").write_text((base_dir / "results.jsonl").read_text())
    (cur / "results.jsonl").write_text((base_dir / "results.jsonl").read_text())
    edit(base / "results.jsonl", 1, keep_steps(3))
    edit(cur / "results.jsonl", 1, keep_steps(3))
    edit(cur / "results.jsonl", 0, scale_steps(1.20, noise=0.01))
    p, v = run_gate(base, cur, "--allow-inconclusive")
    assert p.returncode == 1
    assert v["verdict"] == "fail" and v["inconclusive_points"] == 1


@pytest.mark.parametrize("n1, n2, p", [(3, 3, 0.1), (4, 4, 2 / 70), (5, 5, 2 / 252), (1, 1, 1.0)])
def test_smallest_attainable_p_is_the_exact_tests(n1, n2, p):
    sys.path.insert(0, str(GATE.parent))
    import perf_gate
    from scipy.stats import mannwhitneyu
    assert perf_gate.smallest_p(n1, n2) == pytest.approx(p)
    # scipy's exact test agrees: one side entirely below the other gives exactly that p.
    lo, hi = list(range(n1)), [100 + i for i in range(n2)]
    assert mannwhitneyu(lo, hi, alternative="two-sided", method="exact").pvalue == pytest.approx(p)
    assert perf_gate.steps_needed(0.01) == 5 and perf_gate.steps_needed(0.05) == 4


def test_alpha_outside_0_1_is_refused(results, tmp_path):
    base = results("ci")
    p, _ = run_gate(base, base, "--alpha=1.5")
    assert p.returncode == 2 and "--alpha must be between 0 and 1" in p.stderr


def test_a_verdict_path_that_is_not_a_regular_file_is_refused_before_the_gate_runs(results,
                                                                                   tmp_path):
    """--verdict naming a FIFO (or, run as root, /dev/null) was replaced by a regular file
    through a fixed temporary name; now refused in one line, exit 2, the special file left as
    it was and nothing printed of the gate."""
    import os
    import stat
    base = results("ci")
    fifo = tmp_path / "verdict.fifo"
    os.mkfifo(fifo)
    p, _ = run_gate(base, base, f"--verdict={fifo}")
    assert p.returncode == 2, p.stdout + p.stderr
    assert "verdict" in p.stderr and "dlbench writes only regular files" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "verdict:" not in p.stdout
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    directory = tmp_path / "verdict-dir"
    directory.mkdir()
    p, _ = run_gate(base, base, f"--verdict={directory}")
    assert p.returncode == 2 and directory.is_dir() and not list(directory.iterdir())
