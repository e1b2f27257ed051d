"""The records reader's fuzz target (tests/fuzz/records) at a fixed, derandomized budget, and every
regression input through the report and the gate as a user runs them: exit 2, one line on stderr,
no traceback."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FUZZ = ROOT / "tests" / "fuzz" / "records"
REGRESSIONS = sorted((FUZZ / "regressions").glob("*"))

spec = importlib.util.spec_from_file_location("fuzz_records", FUZZ / "fuzz_records.py")
fuzz_records = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fuzz_records)


def test_mutated_records_are_read_or_refused_cleanly():
    fuzz_records.run(150, derandomize=True)
    assert fuzz_records.executed >= 150


def test_extreme_records_render_the_whole_report():
    """Schema-valid sweeps with the newer fields at the ends of the doubles (1.7e308, 5e-324,
    150,000 noise reasons...) through the full report: a traceback or a RuntimeWarning fails."""
    before = fuzz_records.executed
    fuzz_records.run_extreme(10, derandomize=True)
    assert fuzz_records.executed - before >= 10


def test_every_corpus_and_regression_input_replays():
    for path in fuzz_records.inputs_on_disk():
        fuzz_records.check(path.read_bytes(), full_report=True)


def test_there_is_a_regression_input_per_defect():
    assert len(REGRESSIONS) >= 12


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.name for p in REGRESSIONS])
@pytest.mark.parametrize("tool", ["report", "gate"])
def test_a_regression_input_is_one_line_and_exit_2(tmp_path, path, tool):
    (tmp_path / "results.jsonl").write_bytes(path.read_bytes())
    if tool == "report":
        cmd = [sys.executable, "-m", "dlbench_reports", "report", str(tmp_path)]
    else:
        cmd = [sys.executable, str(ROOT / "ci" / "perf_gate.py"), f"--baseline={tmp_path}",
               f"--current={tmp_path}"]
    p = subprocess.run(cmd, cwd=ROOT / "reports", capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
